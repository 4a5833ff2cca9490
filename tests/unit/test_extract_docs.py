"""Extraction rules on a real crawl of the Python documentation served on loopback: the crawl
fetches and archives the pages, records come out of the archive with the exact expected values,
the required-field check passes, a wrong selector makes it fail with the rate, and a rule change
re-extracts with no request reaching the server. Bad pages (plain text, cut-off markup, a 404, a
lost WARC file) never stop a run, and what went wrong is in ``record_pages``; bad rules are one
line and exit 2, with nothing enqueued."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crawl_platform.extract.checks import check_records
from crawl_platform.extract.records import UnknownCrawlError, set_rules, view_name
from crawl_platform.extract.rules import ExtractionRules, parse_rules
from crawl_platform.extract.run import extract_crawl
from tests.sites.docs import crawl_docs, footer_date
from tests.unit.crawl_rows import crawl_loop
from tests.unit.test_cli import _cli, _nothing_enqueued, _seed_messages, _stderr_lines

EXAMPLE = Path(__file__).parents[2] / "examples" / "extract" / "python_docs.yaml"


def _rules(**changes: object) -> ExtractionRules:
    """The example rules, on every URL (its url_pattern would leave the plain-text page out)."""
    data = yaml.safe_load(EXAMPLE.read_text())
    del data["url_pattern"]
    for name, selector in changes.items():
        data["fields"][name]["selector"] = selector
    return parse_rules(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


@pytest.fixture
def docs_crawl(settings, bus, store, python_docs):
    crawl_docs(settings, bus, store, python_docs, "docs", _rules())
    return python_docs


def test_records_of_a_docs_crawl_come_from_the_archive_with_the_expected_values(store, docs_crawl):
    base = docs_crawl.base_url
    report = extract_crawl(store, "docs")

    assert (report.pages, report.records, report.page_errors) == (6, 5, 1)  # the 404 is not extracted
    assert report.unbounded == ""  # each page in the child process, within the deadline
    rows = store.query(f"SELECT url, version, record_index, title, headings, next, patch, updated, errors::VARCHAR "
                       f"FROM {view_name('docs')} ORDER BY url")
    assert rows == [
        (f"{base}/broken/library/functions.html", 1, 0, "Built-in Functions", [],
         f"{base}/broken/library/constants.html", 2, None, "{}"),  # the footer was cut off
        (f"{base}/glossary.html", 1, 0, "Glossary", [], f"{base}/about.html", 2, footer_date("glossary.html"), "{}"),
        (f"{base}/library/functions.html", 1, 0, "Built-in Functions", [], f"{base}/library/constants.html", 2,
         footer_date("library/functions.html"), "{}"),
        (f"{base}/library/json.html", 1, 0, "json — JSON encoder and decoder",
         ["Basic Usage", "Encoders and Decoders", "Exceptions", "Standard Compliance and Interoperability",
          "Command Line Interface"], f"{base}/library/mailbox.html", 2, footer_date("library/json.html"), "{}"),
        (f"{base}/tutorial/introduction.html", 1, 0, "3. An Informal Introduction to Python",
         ["3.1. Using Python as a Calculator", "3.2. First Steps Towards Programming"],
         f"{base}/tutorial/controlflow.html", 2, footer_date("tutorial/introduction.html"), "{}"),
    ]
    assert store.query("SELECT url, records, error FROM record_pages WHERE error IS NOT NULL") == [
        (f"{base}/_sources/library/functions.rst.txt", 0, "not HTML: text/plain")]
    assert [(c.kind, c.passed, [(r.field, r.rate) for r in c.rates])
            for c in (check_records(store, "docs", "null_rate"), check_records(store, "docs", "type_errors"))] == [
        ("null_rate", True, [("title", 0.0), ("patch", 0.0)]),
        ("type_errors", True, [("patch", 0.0), ("updated", 0.0)]),
    ]
    assert extract_crawl(store, "docs").pages == 0  # nothing left to extract with these rules


def test_a_rule_change_re_extracts_from_the_archive_and_a_wrong_selector_fails_the_check(store, docs_crawl):
    extract_crawl(store, "docs")
    docs_crawl.clear_requests()

    set_rules(store, "docs", _rules(title="css:div.body h7"))  # matches nothing: every title is NULL
    report = extract_crawl(store, "docs")

    assert docs_crawl.requests == []  # no refetch: the archive has the bodies
    assert (report.pages, report.records, report.replaced_pages) == (6, 5, 6)
    assert report.field_errors == {"title: missing": 5}
    titles = store.query(f"SELECT title, errors->>'$.title' FROM {view_name('docs')}")
    assert titles == [(None, "missing: the selector matched nothing")] * 5
    assert store.query("SELECT count(DISTINCT rules_digest) FROM records WHERE crawl_id = 'docs'") == [(1,)]
    check = check_records(store, "docs", "null_rate")
    assert not check.passed
    assert [(r.field, r.rate, r.count, r.passed) for r in check.rates] == [
        ("title", 1.0, 5, False), ("patch", 0.0, 0, True)]
    assert check.summary == "null_rate: title 100.0% of 5 records > 1.0%"


def test_the_extract_command_replaces_the_rules_and_refuses_bad_ones(settings, store, docs_crawl, tmp_path):
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(EXAMPLE.read_text().replace("css:div.body h2", "css:div.body h3"))
    extract_crawl(store, "docs")
    docs_crawl.clear_requests()

    done = _cli(settings, "extract", "docs", "--rules", str(rules_file))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("crawl docs: 5 pages extracted, 5 records, 0 pages with an error (rules ")
    assert lines[1:] == ["replaced the records of 6 pages made by earlier rules",  # the .txt page is not
                         "typed records: SELECT * FROM records_docs"]  # in this url_pattern: 5 pages now
    assert docs_crawl.requests == []
    assert store.query(f"SELECT headings FROM {view_name('docs')} WHERE url LIKE '%/library/json.html'") == [(
        ["Character Encodings", "Infinite and NaN Number Values", "Repeated Names Within an Object",
         "Top-level Non-Object, Non-Array Values", "Implementation Limitations", "Command line options"],)]

    rules_file.write_text("fields: {title: {selector: 'css:h1', type: number}}")
    bad = _cli(settings, "extract", "docs", "--rules", str(rules_file))
    unknown = _cli(settings, "extract", "nope")
    assert (bad.returncode, _stderr_lines(bad)) == (2, [
        f"crawl-platform: {rules_file}: fields.title.type: type must be one of string, int, float, bool, date, "
        "list, not 'number'"])
    assert (unknown.returncode, _stderr_lines(unknown)) == (2, ["crawl-platform: no crawl 'nope'"])


@pytest.mark.parametrize(("rules", "message"), [
    ("fields: {title: 'css:h1 >'}", "fields.title.selector: selector 'css:h1 >' is not valid CSS: "
     "Expected selector, got <EOF at 4>"),
    # RE2: no look-around or back-reference (they need backtracking, exponential time on some text).
    ("fields: {title: {selector: 'xpath://h1', regex: '(?<=v)\\d+'}}", "fields.title.regex: pattern '(?<=v)\\\\d+' "
     "is not a valid RE2 regular expression: invalid perl operator: (?<="),
])
def test_crawl_with_bad_rules_is_one_line_exit_2_and_nothing_enqueued(settings, bus, tmp_path, rules, message):
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(rules)

    done = _cli(settings, "crawl", "http://127.0.0.1:1/", "--extract", str(rules_file))

    assert (done.returncode, _stderr_lines(done)) == (2, [f"crawl-platform: {rules_file}: {message}"])
    assert _nothing_enqueued(bus)


def test_extracting_a_crawl_without_rules_says_so(store, settings, bus, python_docs):
    crawl_docs(settings, bus, store, python_docs, "plain", None, pages=("glossary.html",))
    with pytest.raises(UnknownCrawlError, match=r"^crawl 'plain' has no extraction rules"):
        extract_crawl(store, "plain")


def test_crawl_with_rules_puts_them_on_the_request_and_the_crawl(settings, bus, store, tmp_path):
    done = _cli(settings, "crawl", "http://127.0.0.1:1/", "--crawl-id", "with-rules", "--extract", str(EXAMPLE))

    assert done.returncode == 0, done.stderr
    (request,) = _seed_messages(bus)
    assert parse_rules(request.extract_rules) == parse_rules(EXAMPLE.read_text())
    (stored,) = store.query("SELECT extract_rules FROM crawls WHERE crawl_id = 'with-rules'")[0]
    assert stored == request.extract_rules  # registered by the command itself


def test_a_lost_archive_file_is_an_error_on_its_pages_and_the_others_still_extract(settings, bus, store,
                                                                                     python_docs):
    rules = _rules()
    crawl_docs(settings, bus, store, python_docs, "split", rules, pages=("library/json.html",))
    loop = crawl_loop(settings, bus, store)  # a second batch of the same crawl, in a WARC file of its own
    loop.crawler.frontier.admit("split", [python_docs.url("glossary.html")], 0)
    loop.run_until_idle(max_turns=100)
    (lost,) = store.query("SELECT warc_file FROM pages WHERE url LIKE '%/library/json.html'")[0]
    (store.archive_root / lost).unlink()

    report = extract_crawl(store, "split")

    assert (report.pages, report.records, report.page_errors) == (2, 1, 1)
    assert store.query("SELECT url, records, error FROM record_pages WHERE error IS NOT NULL") == [
        (python_docs.url("library/json.html"), 0,
         f"archive: cannot read {store.archive_root / lost}: No such file or directory")]
    assert store.query(f"SELECT title FROM {view_name('split')}") == [("Glossary",)]


def test_rules_without_required_or_typed_fields_pass_both_checks_trivially(settings, bus, store, python_docs):
    crawl_docs(settings, bus, store, python_docs, "loose", parse_rules("fields: {title: 'css:h1'}"),
               pages=("glossary.html",))
    extract_crawl(store, "loose")
    checks = [check_records(store, "loose", kind) for kind in ("null_rate", "type_errors")]
    assert [(c.passed, c.records, c.rates) for c in checks] == [(True, 1, ()), (True, 1, ())]
