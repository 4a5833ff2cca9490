"""Extraction rules and the extraction engine, on pages of the Python documentation read from disk:
what a schema accepts and the one line it refuses with (for any text: property tests), the exact
records of known pages, typed values and their error notes, and pages that give no record
(non-HTML, empty, broken markup)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawl_platform.extract.engine import Extractor, PageBody
from crawl_platform.extract.rules import (
    MAX_RULES_BYTES,
    MAX_RULES_DEPTH,
    MAX_RULES_VALUES,
    MAX_SELECTOR_LENGTH,
    ExtractionRules,
    RulesError,
    load_rules,
    parse_rules,
)
from tests.sites.docs import DOCS_ROOT, footer_date

EXAMPLES = Path(__file__).parents[2] / "examples" / "extract"


def _page(path: str) -> PageBody:
    return PageBody(f"http://docs.test/{path}", 1, (DOCS_ROOT / path).read_bytes(), "text/html; charset=utf-8")


def test_the_docs_rules_give_the_expected_record_of_known_pages():
    extractor = Extractor(load_rules(EXAMPLES / "python_docs.yaml"))

    functions = extractor.extract(_page("library/functions.html"))
    json_page = extractor.extract(_page("library/json.html"))

    assert functions.error is None
    assert [(r.index, r.values, r.errors) for r in functions.records] == [(0, {
        "title": "Built-in Functions", "headings": [], "next": "http://docs.test/library/constants.html",
        "patch": 2, "updated": footer_date("library/functions.html").isoformat()}, {})]
    assert [r.values for r in json_page.records] == [{
        "title": "json — JSON encoder and decoder",
        "headings": ["Basic Usage", "Encoders and Decoders", "Exceptions",
                     "Standard Compliance and Interoperability", "Command Line Interface"],
        "next": "http://docs.test/library/mailbox.html", "patch": 2,
        "updated": footer_date("library/json.html").isoformat()}]


def test_a_base_selector_gives_one_record_per_match_with_relative_fields():
    extractor = Extractor(load_rules(EXAMPLES / "python_functions.yaml"))

    page = extractor.extract(_page("library/functions.html"))

    assert len(page.records) == 52  # <dl class="py function"> elements in the page
    first = page.records[0]
    assert first.values == {"name": "abs", "anchor": "abs", "summary": (
        "Return the absolute value of a number. The argument may be an integer, a floating point number, "
        "or an object implementing __abs__(). If the argument is a complex number, its magnitude is returned.")}
    assert [r.values["name"] for r in page.records[:4]] == ["abs", "aiter", "all", "anext"]
    assert [r.index for r in page.records] == list(range(52))
    assert not extractor.applies_to("http://docs.test/tutorial/index.html")  # url_pattern '/library/'


def test_a_field_failing_its_type_is_null_with_a_note_and_the_others_stay():
    rules = parse_rules("""
        fields:
          title: {selector: "css:title", required: true}
          release: {selector: "css:title", regex: 'Python ([\\d.]+) documentation', type: float}
          year_as_int: {selector: "css:div.footer", regex: 'Last updated on (\\w+)', type: int}
          when: {selector: "css:div.footer", regex: 'on (\\w+ \\d+)', type: date, date_format: "%Y-%m-%d"}
          flag: {selector: "css:h1", type: bool}
          missing: {selector: "css:h7", required: true}
          optional: {selector: "css:h7"}
    """)
    (record,) = Extractor(rules).extract(_page("library/functions.html")).records

    assert record.values == {"title": "Built-in Functions — Python 3.11.2 documentation", "release": None,
                             "year_as_int": None, "when": None, "flag": None, "missing": None, "optional": None}
    assert record.errors == {
        "release": "type: '3.11.2' is not a finite float",
        "year_as_int": "type: 'October' is not an int",
        "when": "type: 'October 07' is not a date in the format '%Y-%m-%d'",
        "flag": "type: 'Built-in Functions¶' is not a bool (true/false, yes/no, on/off, 1/0)",
        "missing": "missing: the selector matched nothing",
    }


def test_pages_that_give_no_record_say_why_and_never_raise():
    extractor = Extractor(parse_rules("base: 'css:dl.py.function'\nfields: {name: 'css:dt .sig-name'}"))
    source = DOCS_ROOT / "_sources" / "library" / "functions.rst.txt"
    whole = (DOCS_ROOT / "library" / "functions.html").read_bytes()

    text = extractor.extract(PageBody("http://d/f.rst.txt", 1, source.read_bytes(), "text/plain; charset=utf-8"))
    empty = extractor.extract(PageBody("http://d/empty", 1, b"   ", "text/html"))
    no_match = extractor.extract(_page("glossary.html"))
    broken = extractor.extract(PageBody("http://d/broken", 1, whole[: len(whole) * 4 // 10], "text/html"))
    garbage = extractor.extract(PageBody("http://d/garbage", 1, b"\x00\xff<<<>>><dl class='py function'<dt", None))

    assert (text.records, text.error) == ((), "not HTML: text/plain")
    assert (empty.records, empty.error) == ((), "no HTML document: the body is empty")
    assert (no_match.records, no_match.error) == ((), "base 'css:dl.py.function' matched nothing")
    # Markup cut off mid-page: lxml recovers what is there, the records before the cut.
    assert broken.error is None
    assert [r.values["name"] for r in broken.records[:3]] == ["abs", "aiter", "all"]
    assert 0 < len(broken.records) < 52
    assert garbage.error in (None, "base 'css:dl.py.function' matched nothing")


@pytest.mark.parametrize(("text", "message"), [
    ("fields: {title: 'css:h1[['}", "rules.yaml: fields.title.selector: selector 'css:h1[[' is not valid CSS: "
     "Expected ident or '*', got <DELIM '[' at 3>"),
    ("fields: {title: 'xpath://h1['}", "rules.yaml: fields.title.selector: selector 'xpath://h1[' is not valid "
     "XPath: Invalid expression"),
    ("fields: {t: {selector: h1, type: integer}}", "rules.yaml: fields.t.type: type must be one of string, int, "
     "float, bool, date, list, not 'integer'"),
    ("fields: {t: {selector: h1, regex: '(('}}", "rules.yaml: fields.t.regex: pattern '((' is not a valid RE2 "
     "regular expression: missing ): (("),
    ("url_pattern: '['\nfields: {t: h1}", "rules.yaml: url_pattern: pattern '[' is not a valid RE2 regular "
     "expression: missing ]: ["),
    ("fields: [", "rules.yaml: not YAML or JSON at line 2, column 1: did not find expected node content"),
    ("- 1\n- 2", "rules.yaml: must be a mapping with a 'fields' key, not list"),
    ("fields: {}", "rules.yaml: fields: give at least one field"),
    ("fields: {t: {selector: h1, colour: red}}", "rules.yaml: fields.t.colour: unknown key"),
    ("fields: {url: h1}", "rules.yaml: fields: field name 'url' is taken by a column of the records view "
     "(crawl_id, errors, extracted_at, record_index, rules_digest, url, version)"),
    ("checks: {max_null_rate: 2}\nfields: {t: h1}", "rules.yaml: checks.max_null_rate: Input should be less than "
     "or equal to 1"),
])
def test_bad_rules_are_refused_with_one_line(text, message):
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "rules.yaml")
    assert str(caught.value) == message


def test_rules_round_trip_through_their_stored_json_with_the_same_digest(tmp_path):
    rules = load_rules(EXAMPLES / "python_docs.yaml")
    again = parse_rules(rules.to_json())
    assert again == rules
    assert again.digest == rules.digest
    assert len(rules.digest) == 16
    shorthand = parse_rules("fields: {title: 'css:h1'}")
    assert shorthand.fields["title"].selector == "css:h1"
    assert shorthand.digest != rules.digest
    with pytest.raises(RulesError, match=r"^cannot read extraction rules '.*/nope.yaml': No such file"):
        load_rules(tmp_path / "nope.yaml")


def test_the_documented_example_rules_are_valid_and_extract_a_docs_page():
    page = (Path(__file__).parents[2] / "docs" / "extraction.md").read_text()
    example = page[page.index("```yaml\n") + len("```yaml\n"):]
    example = example[:example.index("```\n")]
    rules = parse_rules(example, "docs/extraction.md")
    assert list(rules.fields) == ["title", "headings", "next", "patch", "updated", "shorthand"]
    (record,) = Extractor(rules).extract(_page("library/json.html")).records
    assert record.values["title"] == "json — JSON encoder and decoder"
    assert record.values["shorthand"] == "json — JSON encoder and decoder¶"  # strip: only whitespace
    assert record.values["next"] == "http://docs.test/library/mailbox.html"
    assert record.errors == {}


def _parses_or_refuses(text: str) -> None:
    """What every text must do: give rules, or a one-line RulesError, within a second."""
    started = time.perf_counter()
    try:
        rules = parse_rules(text, "rules.yaml")
    except RulesError as err:
        message = str(err)
        assert message.startswith("rules.yaml: ")
        assert "\n" not in message
    else:
        assert isinstance(rules, ExtractionRules)
        assert parse_rules(rules.to_json()) == rules
    assert time.perf_counter() - started < 1.0


_KEY = st.sampled_from(["fields", "url_pattern", "base", "checks", "selector", "regex", "type", "strip",
                        "attribute", "required", "resolve", "date_format", "max_null_rate", "title", "t"])
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                    st.sampled_from(["css:h1", "xpath://h1", "xpath:count(//*)", "css:a[href]", "(a+)+b",
                                     "(?=x)", "int", "date", "list", "%Y"]))
_JSON = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(_KEY, inner, max_size=5)), max_leaves=30)
_SELECTOR = st.builds(lambda kind, text: kind + text, st.sampled_from(["", "css:", "xpath:"]),
                      st.one_of(st.text(max_size=25), st.text(st.sampled_from("ah1/*[]()@:.#>~+=,'\" "), max_size=25)))
_NAME = st.one_of(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True), st.text(max_size=6))
_NEAR_RULES = st.fixed_dictionaries(  # close to valid rules: random selectors, regexes and values
    {"fields": st.dictionaries(_NAME, st.one_of(_SELECTOR, st.dictionaries(
        _KEY, st.one_of(_SELECTOR, _SCALAR), max_size=5)), min_size=1, max_size=3)},
    optional={"url_pattern": st.one_of(_SCALAR, st.text(max_size=15)), "base": _SELECTOR,
              "checks": st.dictionaries(_KEY, _SCALAR, max_size=2)})


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_text_parses_or_is_refused_with_one_line(text):
    _parses_or_refuses(text)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_JSON, _NEAR_RULES))
def test_any_json_value_parses_or_is_refused_with_one_line(value):
    _parses_or_refuses(json.dumps(value))


@pytest.mark.timing
@pytest.mark.parametrize(("text", "message"), [
    ("fields: " + "[" * 5000 + "]" * 5000, "rules.yaml: not YAML or JSON at line 1, column 1008: exceeded maximum "
     "nesting depth"),
    (json.dumps({"fields": {"t": "h1"}, "checks": json.loads("[" * 900 + "]" * 900)}),
     f"rules.yaml: nested deeper than {MAX_RULES_DEPTH} levels"),
    ("fields:\n" + "".join(" " * i + "a:\n" for i in range(1, 600)), f"rules.yaml: nested deeper than "
     f"{MAX_RULES_DEPTH} levels"),
    # A billion laughs: each list holds the one before ten times over.
    ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
     + "fields: {t: h1}", f"rules.yaml: more than {MAX_RULES_VALUES} values (YAML aliases count each time)"),
    ("a: &a [*a]\nfields: {t: h1}", f"rules.yaml: nested deeper than {MAX_RULES_DEPTH} levels"),
    ("fields: {t: h1}\n#" + "x" * MAX_RULES_BYTES, f"rules.yaml: longer than {MAX_RULES_BYTES // 1024} KiB"),
    (f"fields: {{t: 'xpath:{'/a' * MAX_SELECTOR_LENGTH}'}}", "rules.yaml: fields.t.selector: selector "
     f"'xpath:{'/a' * 17}'... is longer than {MAX_SELECTOR_LENGTH} characters"),
    ("fields: {t: {selector: h1, type: &l [*l]}}", "rules.yaml: nested deeper than 32 levels"),
    # One long string, aliased into ten fields: the stored form would spell it out ten times.
    (f"fields: {{f: {{selector: h1, strip: &s '{'x' * 200_000}'}}, "
     + ", ".join(f"f{i}: {{selector: h1, strip: *s}}" for i in range(10)) + "}",
     "rules.yaml: longer than 1024 KiB written out in full (defaults and aliases spelt out)"),
    ("fields: {t: {selector: h1, date_format: '%Y', type: date}}\nupdated: 2026-13-01", "rules.yaml: not YAML or "
     "JSON: month must be in 1..12"),
])
def test_hostile_rules_are_refused_quickly_with_their_own_line(text, message):
    started = time.perf_counter()
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "rules.yaml")
    assert str(caught.value) == message
    assert time.perf_counter() - started < 1.0
