"""Extraction rules: the declarative schema a crawl carries (YAML or JSON), checked as it is read.

A user writes which pages the rules apply to (``url_pattern``), optionally what one record is on a
page (``base``, many records per page), and per field a selector (``css:…`` or ``xpath:…``; no
prefix means CSS), an ``attribute`` or the element's text, a ``type``, whether it is ``required``,
and a clean-up (``strip``, ``regex``). ``checks`` holds the thresholds of the Great Expectations
checks on the records. :func:`parse_rules` turns text into :class:`ExtractionRules` and raises
:class:`RulesError` with one line on anything wrong (YAML syntax, an unknown key or type, a CSS
or XPath selector that does not compile, a regex RE2 refuses), so a crawl is refused at submission,
never failing later. Rules come from whoever submits a crawl, so reading them is bounded: the text
(:data:`MAX_RULES_BYTES`), its nesting (:data:`MAX_RULES_DEPTH`) and its values with YAML aliases
expanded (:data:`MAX_RULES_VALUES`), the number of fields and a selector's length; the regexes are
RE2's (:mod:`crawl_platform.patterns`: linear time). No text makes :func:`parse_rules` raise anything
but :class:`RulesError`. :mod:`crawl_platform.extract.engine` applies the rules; the crawl stores
:meth:`ExtractionRules.to_json` (``crawls.extract_rules``) and records carry its :attr:`digest`.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from crawl_platform.patterns import compile_pattern

FieldType = Literal["string", "int", "float", "bool", "date", "list"]
FIELD_TYPES: tuple[str, ...] = ("string", "int", "float", "bool", "date", "list")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# Columns of a crawl's typed records view that are not fields (crawl_platform.extract.records).
RESERVED_NAMES = frozenset({"crawl_id", "url", "version", "record_index", "errors", "rules_digest", "extracted_at"})

MAX_RULES_BYTES = 256 * 1024
"""Longest rules document accepted, in UTF-8 bytes."""
MAX_STORED_RULES_BYTES = 4 * MAX_RULES_BYTES
"""Longest the rules may be written out in full (:meth:`ExtractionRules.to_json`, every default and
every YAML alias spelt out): what a crawl stores and its request carries."""
MAX_RULES_DEPTH = 32
"""Deepest nesting of mappings and lists in a rules document (the format itself needs 4)."""
MAX_RULES_VALUES = 20_000
"""Most values (mappings, lists, scalars) in a rules document, YAML aliases counted each time they appear."""
MAX_FIELDS = 200
"""Most fields in one set of rules."""
MAX_SELECTOR_LENGTH = 1_000
"""Longest CSS or XPath selector, in characters: an XPath's cost grows with its steps and predicates."""


class RulesError(ValueError):
    """Extraction rules that cannot be used; ``str(err)`` is one line saying what and where."""


class UnknownCrawlError(LookupError):
    """No crawl of that id, or one without (usable) extraction rules; ``str(err)`` is one line."""


def compile_selector(selector: str) -> Any:
    """The compiled lxml selector (``lxml.etree.XPath`` or ``lxml.cssselect.CSSSelector``) of a
    ``css:``/``xpath:`` selector; raises ValueError with the reason when it does not compile."""
    import lxml.etree  # noqa: PLC0415 - only the crawl's submission and the extraction pay for it

    kind, _, expression = selector.partition(":") if selector.startswith(("css:", "xpath:")) else ("css", "", selector)
    expression = expression.strip()
    if not expression:
        raise ValueError(f"selector {selector!r} is empty")
    if len(expression) > MAX_SELECTOR_LENGTH:
        raise ValueError(f"selector {selector[:40]!r}... is longer than {MAX_SELECTOR_LENGTH} characters")
    if kind == "xpath":
        try:
            return lxml.etree.XPath(expression)
        except (lxml.etree.LxmlError, ValueError) as err:  # ValueError: a character XML does not allow
            raise ValueError(f"selector {selector!r} is not valid XPath: {err}") from None
    import cssselect  # noqa: PLC0415
    from lxml.cssselect import CSSSelector  # noqa: PLC0415

    try:
        return CSSSelector(expression)
    except (cssselect.SelectorError, lxml.etree.LxmlError, ValueError) as err:
        raise ValueError(f"selector {selector!r} is not valid CSS: {err}") from None
    except RecursionError:  # cssselect parses nested :not(...) recursively
        raise ValueError(f"selector {selector[:40]!r}... nests too deeply") from None


def _check_selector(value: str) -> str:
    compile_selector(value)
    return value


class FieldRule(BaseModel):
    """One field of a record: where it is, how it is cleaned, what type it has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    selector: str = Field(description="css:SELECTOR or xpath:EXPRESSION (no prefix: CSS)")
    attribute: str | None = Field(None, description="read this attribute; default: the element's text")
    type: FieldType = "string"
    required: bool = False
    strip: bool | str = Field(True, description="true: trim and collapse whitespace; a string: also strip "
                              "these characters at both ends; false: the raw text")
    regex: str | None = Field(None, description="keep the first group of the first match (the whole match "
                              "if the pattern has no group)")
    resolve: bool = Field(False, description="make the value an absolute URL against the page's final URL "
                          "(for href or src attributes)")
    date_format: str | None = Field(None, description="strptime format of a date (default: ISO 8601, then "
                                    "any format python-dateutil reads)")

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        return _check_selector(value)

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            compile_pattern(value)  # PatternError is a ValueError: pydantic reports it
        return value

    @model_validator(mode="after")
    def _date_format_only_for_dates(self) -> FieldRule:
        if self.date_format is not None and self.type != "date":
            raise ValueError("date_format is only for type date")
        return self


class Checks(BaseModel):
    """Thresholds of the asset checks on a crawl's records (fractions of its records, 0..1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_null_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="most records whose required field is NULL")
    max_type_error_rate: Annotated[float, Field(ge=0, le=1)] = Field(
        0.0, description="most records whose typed field failed its type")


def _shorthand(value: Any) -> Any:
    """A field given as a plain string is its selector."""
    return {"selector": value} if isinstance(value, str) else value


class ExtractionRules(BaseModel):
    """A crawl's extraction schema (the format: docs/extraction.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url_pattern: str | None = Field(None, description="a regex searched in the URL: the pages the rules apply to")
    base: str | None = Field(None, description="one record per element it matches (default: one per page)")
    fields: dict[str, FieldRule] = Field(min_length=1, max_length=MAX_FIELDS)
    checks: Checks = Checks()

    @field_validator("url_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            compile_pattern(value)
        return value

    @field_validator("base")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return None if value is None else _check_selector(value)

    @field_validator("fields", mode="before")
    @classmethod
    def _fields(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name in value:
                if not isinstance(name, str) or not _FIELD_NAME.match(name):
                    raise ValueError(f"field name {name!r} must be a letter or _, then letters, digits or _ "
                                     "(it becomes a column)")
                if name.lower() in RESERVED_NAMES:
                    raise ValueError(f"field name {name!r} is taken by a column of the records view "
                                     f"({', '.join(sorted(RESERVED_NAMES))})")
            return {name: _shorthand(rule) for name, rule in value.items()}
        return value

    def to_json(self) -> str:
        """Canonical JSON (defaults written out, fields in their given order, the view's column
        order): what a crawl stores and hashes."""
        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def digest(self) -> str:
        """16 hex digits of the canonical JSON's sha256: which rules made a record."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def parse_rules(text: str, source: str = "extraction rules", max_bytes: int = MAX_RULES_BYTES) -> ExtractionRules:
    """Rules from YAML or JSON text (JSON is YAML); raises :class:`RulesError` with one line, and
    nothing else, whatever the text."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise RulesError(f"{source}: longer than {max_bytes // 1024} KiB")
    data = _load(text, source)
    if not isinstance(data, dict):
        raise RulesError(f"{source}: must be a mapping with a 'fields' key, not {type(data).__name__}")
    try:
        rules = ExtractionRules.model_validate(data)
    except ValidationError as err:
        raise RulesError(f"{source}: {_reason(err)}") from None
    except Exception as err:  # a selector library's own error on the user's selector: still the rules'
        raise RulesError(f"{source}: {type(err).__name__}: {_one_line(str(err))[:300]}") from None
    try:
        stored = len(rules.to_json().encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\\ud800"): the lake stores UTF-8
        raise RulesError(f"{source}: holds text that is not valid Unicode (a lone surrogate)") from None
    if stored > MAX_STORED_RULES_BYTES:
        raise RulesError(f"{source}: longer than {MAX_STORED_RULES_BYTES // 1024} KiB written out in full "
                         "(defaults and aliases spelt out)")
    return rules


def _load(text: str, source: str) -> Any:
    """The document's data, bounded in depth and in values with aliases expanded. JSON is read as
    JSON first (YAML 1.1 refuses the surrogate pairs JSON writes for characters outside the BMP),
    then as YAML by libyaml, the C loader: it reads in linear time and refuses nesting past 1,000
    levels, where PyYAML's pure-Python reader is quadratic in nesting and recurses once a level."""
    import yaml  # noqa: PLC0415

    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        pass  # YAML, or neither: libyaml says which
    except RecursionError:
        raise RulesError(f"{source}: nested deeper than {MAX_RULES_DEPTH} levels") from None
    except ValueError as err:  # an integer of more than 4,300 digits
        raise RulesError(f"{source}: not YAML or JSON: {_one_line(str(err))}") from None
    else:
        _check_size(data, source)
        return data
    try:
        data = yaml.load(text, Loader=yaml.CSafeLoader)  # the safe loader, in C
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise RulesError(f"{source}: not YAML or JSON{where}: {_one_line(problem)}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as err:  # a bad date or !!int, say
        raise RulesError(f"{source}: not YAML or JSON: {_one_line(str(err)) or type(err).__name__}") from None
    _check_size(data, source)
    return data


def _check_size(data: Any, source: str) -> None:
    """Raise :class:`RulesError` when ``data`` nests deeper than :data:`MAX_RULES_DEPTH` or holds
    more than :data:`MAX_RULES_VALUES` values; iterative, and stops at the limit (an alias to itself
    makes an endless structure)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_RULES_VALUES:
            raise RulesError(f"{source}: more than {MAX_RULES_VALUES} values (YAML aliases count each time)")
        if depth > MAX_RULES_DEPTH:
            raise RulesError(f"{source}: nested deeper than {MAX_RULES_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)


def load_rules(path: Path) -> ExtractionRules:
    """Rules from a YAML or JSON file; a missing or unreadable file is a :class:`RulesError` too."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise RulesError(f"cannot read extraction rules {str(path)!r}: {reason}") from None
    return parse_rules(text, source=str(path))


def rules_from_json(text: str, source: str = "stored extraction rules") -> ExtractionRules:
    """Rules as a crawl stored them, or its request carries them (:meth:`ExtractionRules.to_json`:
    written out in full, so up to :data:`MAX_STORED_RULES_BYTES`)."""
    return parse_rules(text, source, max_bytes=MAX_STORED_RULES_BYTES)


def _reason(err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "too_short" and first["loc"] == ("fields",):
        message = "give at least one field"
    elif first["type"] == "literal_error" and first["loc"][-1] == "type":
        message = f"type must be one of {', '.join(FIELD_TYPES)}, not {_short(first['input'])}"
    text = f"{where}: {message}" if where else message
    return _one_line(text)[:500]


def _short(value: Any) -> str:
    """``repr`` of a user's value, cut to a few dozen characters (an aliased structure can be vast)."""
    return repr(value)[:60] if isinstance(value, str | int | float | bool | None) else type(value).__name__


def _one_line(text: str) -> str:
    return " ".join(text.split())
