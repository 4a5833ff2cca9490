"""Turns a fetched HTML page into a title, readable text and canonical outgoing links.

Three extractors with one contract: selectolax on lexbor (the default, an HTML5 parser), lxml
(``CRAWL_PARSER=lxml``, libxml2) and BeautifulSoup (``CRAWL_PARSER=bs4``, for those who want its
leniency). On the Python docs selectolax gives exactly lxml's titles, text and links, faster
(measured by ``benchmarks/parse_engines.py``). Links come back canonicalised by :mod:`crawl_platform.urls`,
deduplicated per page, with their anchor text; scope filtering is the frontier's job, not the
parser's. Bytes become text once, in :mod:`crawl_platform.parse.encoding` (header, meta,
detection), and the engines only ever see text, so all agree on the charset and a page with broken
bytes still parses. Hostile markup (unclosed tags, NUL bytes, an XML declaration) never raises: an
engine that fails hands the page to the next, and the worst case is an empty document; any other
failure on one page comes back as an empty document with the error (``documents.parse_error``),
so one page never stops the pages parsed beside it. A page keeps at most ``max_links`` links
(``CRAWL_MAX_LINKS_PER_PAGE``): the work stops there, however many a hostile page has. lexbor's
parse grows with the square of ``<div>`` nesting (a hostile page of nested ``<div>`` elements takes
minutes), so a page nested deeper than :data:`~crawl_platform.parse.main_text.MAX_DEPTH` goes to lxml, which
caps nesting. Every page also gets its main content (text without boilerplate, language,
SimHash) from :mod:`crawl_platform.parse.main_text`, whatever the engine.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urljoin

from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.encoding import decode_html
from crawl_platform.parse.main_text import MainContent, extract_main_content, nested_too_deep

# lxml refuses text that starts with an XML encoding declaration; the text is decoded already.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>", re.I)
_local = threading.local()  # an lxml parser per thread: they must not be shared across threads
# Control characters not allowed in an lxml tree (C0 but tab, newline, carriage return).
_CONTROL_BYTES = bytes([*range(9), 11, 12, *range(14, 32)])


def strip_control(text: str) -> str:
    """``text`` without the control characters an lxml tree refuses. In UTF-8 they are single
    bytes that no multi-byte sequence contains, so deleting those bytes from the encoded text is
    exact, and done in C: far cheaper than a regular expression or ``str.translate`` (a dict lookup
    per character)."""
    return text.encode("utf-8", "surrogatepass").translate(None, _CONTROL_BYTES).decode("utf-8", "surrogatepass")


ParserEngine = Literal["selectolax", "lxml", "bs4"]  # CRAWL_PARSER
DEFAULT_ENGINE: ParserEngine = "selectolax"
_A = TypeVar("_A")  # a link as an engine gives it (an lxml element, a BeautifulSoup tag)


@dataclass(frozen=True)
class ParsedPage:
    title: str | None
    text: str
    links: tuple[tuple[str, str], ...]  # (canonical absolute URL, anchor text)
    charset: str | None = None  # the charset the body was decoded with
    main: MainContent | None = None  # main text, language, SimHash (None: not extracted)
    links_truncated: bool = False  # the page had more links than it keeps (max_links)
    error: str | None = None  # why the parser gave no title, text or links (None: it did)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _collect(base_url: str, raw_links: Iterable[tuple[str, _A]], anchor_text: Callable[[_A], str],
             max_links: int) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The links' canonical URLs in page order, each once, with the anchor text of its first link,
    and whether links were cut. ``anchor_text`` reads a link's text, asked only for the links kept.
    A page links the same href over and over, mostly with other fragments (most of the Python docs'
    links name a target another link already named), and a fragment never changes the URL, so each
    href is resolved once, without it. The work stops at the first link past ``max_links``, or once
    4 x ``max_links`` distinct hrefs were resolved (hrefs that lead nowhere, ``javascript:`` and the
    like, cost no more than links): ``raw_links`` is read no further."""
    from crawl_platform.urls import resolve_link  # noqa: PLC0415 - keeps the import graph acyclic

    seen: dict[str, str] = {}
    tried: set[str] = set()
    most_tried = 4 * max_links
    for raw, link in raw_links:
        href = raw.strip()
        cut = href.find("#")
        if cut > 0:
            href = href[:cut]
        if href in tried:
            continue
        if len(tried) >= most_tried:
            return tuple(seen.items()), True
        tried.add(href)
        url = resolve_link(base_url, href)
        if url is not None and url not in seen:
            if len(seen) >= max_links:
                return tuple(seen.items()), True
            seen[url] = _squash(anchor_text(link))[:500]
    return tuple(seen.items()), False


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def _rebased(base_url: str, href: str) -> str:
    """The base a ``<base href>`` sets; an href that is no URL (``http://[``) is ignored, as
    browsers ignore it, rather than costing the page its links."""
    try:
        return urljoin(base_url, href)
    except ValueError:
        return base_url


def parse_html(body: bytes, base_url: str, content_type: str | None = None,
               engine: ParserEngine = DEFAULT_ENGINE, *, main_content: bool = True,
               max_links: int = MAX_LINKS_PER_PAGE) -> ParsedPage:
    """Extract title, text and at most ``max_links`` links; ``base_url`` is the page's final URL
    (after redirects). ``main_content=False`` skips the main-content step (``main`` stays None; the
    benchmark's baseline). Never raises: a page the parser fails on comes back without title, text
    or links, and ``error`` says why."""
    charset = None
    try:
        decoded = decode_html(body, content_type)
        charset = decoded.charset
        text = strip_control(_XML_DECLARATION.sub("", decoded.text, count=1))
        main = extract_main_content(text) if main_content else None
        if not text.strip():
            return ParsedPage(None, "", (), charset, main)
        if engine == "selectolax" and (main.error is not None if main is not None else nested_too_deep(text)):
            # Too deep (or Resiliparse's lexbor could not tell): lexbor's parse is quadratic in <div>
            # nesting, and libxml2 caps nesting.
            engine = "lxml"
        extractors = {"selectolax": (_parse_selectolax, _parse_lxml, _parse_bs4), "lxml": (_parse_lxml, _parse_bs4),
                      "bs4": (_parse_bs4,)}[engine]
        failed: Exception | None = None
        for extract in extractors:
            try:
                page = extract(text, base_url, max_links)
            except (ValueError, RecursionError) as err:  # pathological markup: try the next, else no document
                failed = err
                continue
            return ParsedPage(page.title, page.text, page.links, charset, main, page.links_truncated)
        return ParsedPage(None, "", (), charset, main, error=_one_line(failed) if failed else None)
    except Exception as err:  # one page's failure is that page's, recorded on its row
        return ParsedPage(None, "", (), charset, None, error=_one_line(err))


def _parse_selectolax(markup: str, base_url: str, max_links: int) -> ParsedPage:
    from selectolax.lexbor import LexborHTMLParser  # noqa: PLC0415

    tree = LexborHTMLParser(markup)
    base = tree.css_first("base[href]")
    if base is not None:
        base_url = _rebased(base_url, base.attributes.get("href") or "")
    title_el = tree.css_first("title")
    title = _squash(title_el.text()) if title_el is not None else None
    # Anchor text as lxml's string(): the text nodes joined as they are (no comments).
    links, cut = _collect(base_url, ((href, a) for a in tree.css("a") if (href := a.attributes.get("href"))),
                          lambda a: a.text(), max_links)
    tree.strip_tags(["script", "style", "noscript", "template"])
    root = tree.body if tree.body is not None else tree.root
    # The text nodes joined by a space, as lxml's XPath list below, then squashed.
    return ParsedPage(title or None, _squash(root.text(separator=" ")) if root is not None else "", links,
                      links_truncated=cut)


def _parse_lxml(markup: str, base_url: str, max_links: int) -> ParsedPage:
    import lxml.etree  # noqa: PLC0415

    parser = getattr(_local, "lxml_parser", None)
    if parser is None:
        # lxml.etree's own HTML parser, not lxml.html's: the same tree, without lxml.html's Python
        # lookup of an element class for every element an iteration touches (a noticeable share of
        # the parse). huge_tree lifts libxml2's nesting limit from 256 to 2048 elements, past
        # which it silently drops the rest of a page; the size limits it also lifts are the
        # fetcher's job (the body cap).
        parser = _local.lxml_parser = lxml.etree.HTMLParser(huge_tree=True)
    doc = lxml.etree.fromstring(markup, parser)
    if doc is None:
        # A document lxml gives up on (nothing but a comment, say): BeautifulSoup is more lenient.
        return _parse_bs4(markup, base_url, max_links)
    base = doc.find(".//base[@href]")
    if base is not None:
        base_url = _rebased(base_url, base.get("href"))
    title_el = doc.find(".//title")
    title = _squash(_text_content(title_el)) if title_el is not None else None
    links, cut = _collect(base_url, ((href, a) for a in doc.iter("a") if (href := a.get("href"))), _text_content,
                          max_links)
    lxml.etree.strip_elements(doc, "script", "style", "noscript", "template", with_tail=False)
    body_el = doc.find("body")
    # The text nodes as one XPath list: what itertext() gives, for less CPU.
    text = _squash(" ".join(_text_nodes()(body_el if body_el is not None else doc)))
    return ParsedPage(title or None, text, links, links_truncated=cut)


def _text_content(element: Any) -> str:
    """An element's text with its descendants', as lxml.html's ``text_content()`` gives it."""
    return str(_string_xpath()(element))


@functools.cache
def _text_nodes() -> Any:
    import lxml.etree  # noqa: PLC0415

    return lxml.etree.XPath("descendant-or-self::text()", smart_strings=False)


@functools.cache
def _string_xpath() -> Any:
    import lxml.etree  # noqa: PLC0415

    return lxml.etree.XPath("string()", smart_strings=False)  # lxml.html's own, for text_content()


def _parse_bs4(markup: str, base_url: str, max_links: int) -> ParsedPage:
    from bs4 import BeautifulSoup  # noqa: PLC0415

    soup = BeautifulSoup(markup, "lxml")
    base = soup.find("base", href=True)
    if base is not None:
        base_url = _rebased(base_url, str(base.get("href")))
    title = _squash(soup.title.get_text()) if soup.title is not None else None
    links, cut = _collect(base_url, ((str(a.get("href")), a) for a in soup.find_all("a", href=True)),
                          lambda a: str(a.get_text()), max_links)
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    root = soup.body if soup.body is not None else soup
    return ParsedPage(title or None, _squash(root.get_text(" ")), links, links_truncated=cut)
