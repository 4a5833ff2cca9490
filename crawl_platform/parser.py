"""Turns a fetched HTML page into a title, readable text and canonical outgoing links.

Two extractors with one contract: lxml (the default, many times faster) and BeautifulSoup
(``CRAWL_PARSER=bs4``, for those who want its leniency or extraction rules). Links come back
canonicalised by :mod:`crawl_platform.urls`, deduplicated per page, with their anchor text;
scope filtering is the frontier's job, not the parser's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.I)


@dataclass(frozen=True)
class ParsedPage:
    title: str | None
    text: str
    links: tuple[tuple[str, str], ...]  # (canonical absolute URL, anchor text)


def charset_of(content_type: str | None) -> str | None:
    match = _CHARSET.search(content_type or "")
    return match.group(1) if match else None


def _squash(text: str) -> str:
    return " ".join(text.split())


def _collect(base_url: str, raw_links: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    from crawl_platform.urls import resolve_link  # noqa: PLC0415 - keeps the import graph acyclic

    seen: dict[str, str] = {}
    for href, anchor in raw_links:
        url = resolve_link(base_url, href)
        if url is not None and url not in seen:
            seen[url] = _squash(anchor)[:500]
    return tuple(seen.items())


def parse_html(body: bytes, base_url: str, content_type: str | None = None,
               engine: Literal["lxml", "bs4"] = "lxml") -> ParsedPage:
    """Extract title, text and links; ``base_url`` is the page's final URL (after redirects)."""
    if engine == "bs4":
        return _parse_bs4(body, base_url, content_type)
    return _parse_lxml(body, base_url, content_type)


def _parse_lxml(body: bytes, base_url: str, content_type: str | None) -> ParsedPage:
    import lxml.etree  # noqa: PLC0415
    import lxml.html  # noqa: PLC0415

    if not body.strip():
        return ParsedPage(None, "", ())
    charset = charset_of(content_type)
    try:
        parser = lxml.html.HTMLParser(encoding=charset) if charset else None
        doc = lxml.html.document_fromstring(body, parser=parser)
    except (lxml.etree.ParserError, LookupError, ValueError):
        # Unknown charset label or a document lxml gives up on: BeautifulSoup is more lenient.
        return _parse_bs4(body, base_url, content_type)
    base = doc.find(".//base[@href]")
    if base is not None:
        base_url = lxml.html.urljoin(base_url, base.get("href"))
    title_el = doc.find(".//title")
    title = _squash(title_el.text_content()) if title_el is not None else None
    raw = [(a.get("href") or "", a.text_content()) for a in doc.iter("a") if a.get("href")]
    lxml.etree.strip_elements(doc, "script", "style", "noscript", "template", with_tail=False)
    body_el = doc.find("body")
    text = _squash(" ".join((body_el if body_el is not None else doc).itertext()))
    return ParsedPage(title or None, text, _collect(base_url, raw))


def _parse_bs4(body: bytes, base_url: str, content_type: str | None) -> ParsedPage:
    from urllib.parse import urljoin  # noqa: PLC0415

    from bs4 import BeautifulSoup  # noqa: PLC0415

    soup = BeautifulSoup(body, "lxml", from_encoding=charset_of(content_type))
    base = soup.find("base", href=True)
    if base is not None:
        base_url = urljoin(base_url, str(base.get("href")))
    title = _squash(soup.title.get_text()) if soup.title is not None else None
    raw = [(str(a.get("href")), a.get_text()) for a in soup.find_all("a", href=True)]
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    root = soup.body if soup.body is not None else soup
    return ParsedPage(title or None, _squash(root.get_text(" ")), _collect(base_url, raw))
