"""Applying a crawl's extraction rules to stored responses: page bytes in, typed records out.

:class:`Extractor` compiles the rules once (selectors as lxml XPath, CSS through cssselect) and
turns each response (a :class:`Response`: the archive's ``ArchivedResponse`` or a
:class:`PageBody`) into a :class:`PageExtraction`: its records, each with its field values and a
note per field that went wrong (``missing:``, ``regex:``, ``type:``; the value is then NULL), or
the one reason the page gave none (not HTML, no document, ``base`` matched nothing). Nothing a page
holds stops a batch: broken markup is parsed as lxml recovers it, and any failure inside one page
becomes that page's error. The caller (:mod:`crawl_platform.extract.run`) lands the results with
:mod:`crawl_platform.extract.records`; this module reads no store and imports no Dagster.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urljoin

from crawl_platform.extract.rules import ExtractionRules, FieldRule, compile_selector
from crawl_platform.extract.values import TypeMismatchError, convert
from crawl_platform.parse.encoding import decode_html
from crawl_platform.parse.html import strip_control
from crawl_platform.patterns import compile_pattern

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# As in crawl_platform.parse.html: lxml refuses decoded text that starts with an XML encoding
# declaration, and control characters are not allowed in its tree.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>", re.I)
_local = threading.local()  # an lxml parser per thread: they must not be shared across threads


class Response(Protocol):
    """What extraction needs of a stored response (``ArchivedResponse`` has it)."""

    @property
    def url(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def final_url(self) -> str: ...
    @property
    def content_type(self) -> str | None: ...
    @property
    def body(self) -> bytes: ...


@dataclass(frozen=True)
class PageBody:
    """A response from elsewhere than the archive (a file, a benchmark); ``final_url`` defaults to ``url``."""

    url: str
    version: int
    body: bytes
    content_type: str | None = "text/html"
    final_url: str = ""

    def __post_init__(self) -> None:
        if not self.final_url:
            object.__setattr__(self, "final_url", self.url)


@dataclass(frozen=True)
class Record:
    """One record: ``values`` holds every field (None when missing or failing), ``errors`` a note
    per field that went wrong, e.g. ``{"year": "type: 'MMXXVI' is not an int"}``."""

    index: int
    values: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PageExtraction:
    """What one page version gave: records, or (with none) the reason in ``error``."""

    url: str
    version: int
    records: tuple[Record, ...]
    error: str | None = None


class Extractor:
    """The compiled form of one set of rules; thread-safe (each thread parses with its own parser)."""

    def __init__(self, rules: ExtractionRules) -> None:
        self.rules = rules
        self._pattern = compile_pattern(rules.url_pattern) if rules.url_pattern else None
        self._base = compile_selector(rules.base) if rules.base else None
        self._fields = [(name, rule, compile_selector(rule.selector)) for name, rule in rules.fields.items()]

    def applies_to(self, url: str) -> bool:
        """Whether the rules' ``url_pattern`` (a regex searched in the URL) admits ``url``."""
        return self._pattern is None or self._pattern.search(url) is not None

    def extract_all(self, responses: Iterable[Response]) -> Iterator[PageExtraction]:
        """:meth:`extract` of each response the URL pattern admits, in order."""
        for response in responses:
            if self.applies_to(response.url):
                yield self.extract(response)

    def extract(self, response: Response) -> PageExtraction:
        """The records of one response; never raises (a failure is the page's ``error``)."""
        url, version = response.url, response.version
        media_type = (response.content_type or "").split(";", 1)[0].strip().lower()
        if media_type and media_type not in HTML_TYPES:
            return PageExtraction(url, version, (), f"not HTML: {media_type}")
        try:
            root = _document(response.body, response.content_type)
            if root is None:
                return PageExtraction(url, version, (), "no HTML document: the body is empty")
            elements = self._base(root) if self._base is not None else [root]
            if self._base is not None and not elements:
                return PageExtraction(url, version, (), f"base {self.rules.base!r} matched nothing")
            page_url = response.final_url or url
            records = tuple(self._record(i, element, page_url) for i, element in enumerate(elements))
        except Exception as err:  # one bad page must never stop a batch: its error is recorded
            return PageExtraction(url, version, (), f"extraction failed: {type(err).__name__}: {_one_line(err)}")
        return PageExtraction(url, version, records)

    def _record(self, index: int, element: Any, page_url: str) -> Record:
        values: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, rule, selector in self._fields:
            values[name], note = _field(rule, selector(element), page_url)
            if note is not None:
                errors[name] = note
        return Record(index, values, errors)


def _document(body: bytes, content_type: str | None) -> Any:
    """The lxml root of the page, or None when it holds no markup at all."""
    import lxml.etree  # noqa: PLC0415
    import lxml.html  # noqa: PLC0415

    text = _XML_DECLARATION.sub("", decode_html(body, content_type).text, count=1)
    text = strip_control(text)
    if not text.strip():
        return None
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = lxml.html.HTMLParser(huge_tree=True)
    try:
        return lxml.html.document_fromstring(text, parser=parser)
    except lxml.etree.ParserError:  # nothing lxml can make a tree of (a lone comment, say)
        return None


def _texts(rule: FieldRule, found: Any) -> list[str]:
    """The raw strings a selector's result holds: elements' text or attribute, XPath strings and numbers."""
    import lxml.etree  # noqa: PLC0415

    items = found if isinstance(found, list) else [found]
    texts: list[str] = []
    for item in items:
        if isinstance(item, lxml.etree._Element):
            if rule.attribute is not None:
                value = item.get(rule.attribute)
                if value is not None:
                    texts.append(value)
            else:
                texts.append(lxml.etree.tostring(item, method="text", encoding="unicode", with_tail=False))
        elif isinstance(item, bool):
            texts.append("true" if item else "false")
        elif isinstance(item, float):
            texts.append(str(int(item)) if item.is_integer() else repr(item))
        elif isinstance(item, str):
            texts.append(str(item))
    return texts


def _clean(rule: FieldRule, text: str) -> str:
    if rule.strip is False:
        return text
    text = " ".join(text.split())
    if isinstance(rule.strip, str):
        text = " ".join(text.strip(rule.strip).split())
    return text


def _field(rule: FieldRule, found: Any, page_url: str) -> tuple[Any, str | None]:
    """(value, error note) of one field; the value is None whenever there is a note."""
    texts = [_clean(rule, t) for t in _texts(rule, found)]
    texts = [t for t in texts if t]
    if rule.regex is not None:
        pattern = compile_pattern(rule.regex)  # RE2, cached
        matched = [m for m in (pattern.search(t) for t in texts) if m is not None]
        if texts and not matched:
            return None, f"regex: {rule.regex!r} matched none of {len(texts)} value(s), e.g. {texts[0][:60]!r}"
        groups = [m.group(1) if pattern.groups else m.group(0) for m in matched]
        texts = [t for t in groups if t is not None]
    if rule.resolve:
        texts = [urljoin(page_url, t) for t in texts]
    if rule.type == "list":
        if not texts and rule.required:
            return None, "missing: the selector matched nothing"
        return texts, None
    if not texts:
        return None, ("missing: the selector matched nothing" if rule.required else None)
    try:
        return convert(texts[0], rule.type, rule.date_format), None
    except TypeMismatchError as err:
        return None, f"type: {err}"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300]
