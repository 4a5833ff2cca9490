"""Which pages of a crawl are rendered, and why: the ``auto`` heuristic.

``always`` renders every HTML page. ``auto`` looks at what the HTTP fetch gave, and renders a page
when one of these holds, in this order (the first is the reason recorded in ``pages.render_reason``):

1. its host needed rendering before (``hosts.render_needed``): a site built in the browser is so
   throughout, and its next pages are rendered without looking;
2. the crawl has extraction rules that apply to the page, and a required field came back empty;
3. it is an app shell: it has scripts and fewer than :data:`APP_SHELL_TEXT_CHARS` characters of
   visible text.

A page that needed rendering for reason 2 or 3 marks its host, so the host is rendered from then
on. A page ``auto`` leaves alone gets the reason it was not rendered. Nothing here starts a browser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crawl_platform.extract.engine import Extractor, PageBody
from crawl_platform.fetch.results import FetchResult
from crawl_platform.parse.html import ParsedPage

APP_SHELL_TEXT_CHARS = 200
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)


@dataclass(frozen=True)
class RenderDecision:
    """Whether to render a page, the reason, and whether it marks its host as needing rendering."""

    render: bool
    reason: str
    marks_host: bool = False


def decide(mode: str, result: FetchResult, parsed: ParsedPage | None, extractor: Extractor | None,
           host_needs_rendering: bool) -> RenderDecision:
    """The decision for one fetched HTML page of a crawl whose mode is ``always`` or ``auto``."""
    if mode == "always":
        return RenderDecision(True, "always")
    if host_needs_rendering:
        return RenderDecision(True, "auto: its host needed rendering before")
    if extractor is not None and extractor.applies_to(result.url):
        empty = _empty_required(extractor, result)
        if empty:
            return RenderDecision(True, f"auto: required field {empty!r} empty over HTTP", marks_host=True)
    text = len(parsed.text) if parsed is not None else 0
    scripts = len(_SCRIPT.findall(result.body))
    if scripts and text < APP_SHELL_TEXT_CHARS:
        return RenderDecision(True, f"auto: app shell ({text} characters of text, {scripts} scripts)", marks_host=True)
    links = len(parsed.links) if parsed is not None else 0
    return RenderDecision(False, f"auto: not needed ({text} characters of text, {links} links, {scripts} scripts)")


def _empty_required(extractor: Extractor, result: FetchResult) -> str | None:
    """The first required field no record of the page has a value for (or, with no record at all,
    the first required field); None when every required field is filled."""
    required = [name for name, rule in extractor.rules.fields.items() if rule.required]
    if not required:
        return None
    page = extractor.extract(PageBody(result.url, 1, result.body, result.content_type, result.final_url))
    if not page.records:
        return required[0]
    for name in required:
        if any(record.values.get(name) in (None, "") for record in page.records):
            return name
    return None
