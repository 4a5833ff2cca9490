"""A page's main content: its text without navigation, headers and footers, its language and its SimHash.

Called by :func:`crawl_platform.parse.html.parse_html` for every HTML document on the crawl path,
so it has to be cheap (measured by ``benchmarks/main_text_cost.py``). Resiliparse does
the work: ``HTMLTree.parse`` (the lexbor HTML5 parser) and
``extract_plain_text(main_content=True)``, which drops boilerplate by element and class heuristics
and keeps paragraphs on lines of their own; ``detect_fast`` names the language from character
n-gram profiles (101 languages). :func:`crawl_platform.parse.simhash.simhash64` fingerprints the
result for :mod:`crawl_platform.dedup.near_duplicates`. Nothing here raises for a page: an input
Resiliparse cannot take comes back as a :class:`MainContent` with no text and the error's name and
message, which ``documents.main_text_error`` keeps, so a bad page never stops a batch, and a page
nested more than :data:`MAX_DEPTH` elements deep is skipped (the extractor's time grows with
elements times depth).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from crawl_platform.parse.simhash import simhash64

UNKNOWN_LANGUAGE = "unknown"  # what detect_fast answers when no profile is close enough
# extract_plain_text(main_content=True) costs about (elements x nesting depth): a hostile page of
# deeply nested <div>s takes minutes. Pages nested deeper than this are skipped with an error note;
# real pages stay far below it. Below _CHECK_FROM characters the worst case is small anyway, so the
# check (a CSS child chain matched by lexbor, itself a cost) runs only on larger markup.
MAX_DEPTH = 128
_CHECK_FROM = 16_384
_TOO_DEEP = " > ".join(["*"] * (MAX_DEPTH + 1))
TOO_DEEP_ERROR = f"skipped: elements nested more than {MAX_DEPTH} deep"


@dataclass(frozen=True)
class MainContent:
    """What lands in ``documents.main_text``, ``language``, ``simhash``, ``extractor`` and ``main_text_error``."""

    text: str | None  # None when extraction failed (``error`` says why); "" for a page without text
    language: str | None  # ISO 639-1 code; None for no text or no confident guess
    simhash: int | None  # unsigned 64-bit; None without a word of main text
    extractor: str  # e.g. "resiliparse 2.0.1"
    error: str | None = None


@functools.cache
def extractor_name() -> str:
    """The extractor and its installed version, recorded on every row it produced."""
    return f"resiliparse {version('resiliparse')}"


def extract_main_content(markup: str) -> MainContent:
    """Main text, language and SimHash of an HTML document given as text (already decoded)."""
    from resiliparse.extract.html2text import extract_plain_text  # noqa: PLC0415 - loads lexbor once used
    from resiliparse.parse.html import HTMLTree  # noqa: PLC0415
    from resiliparse.parse.lang import detect_fast  # noqa: PLC0415

    try:
        tree = HTMLTree.parse(markup)
        if _too_deep(tree, markup):
            return MainContent(None, None, None, extractor_name(), TOO_DEEP_ERROR)
        text = extract_plain_text(tree, main_content=True)
        if not text.strip():  # detect_fast guesses "en" for empty text: say nothing instead
            return MainContent("", None, None, extractor_name())
        language, _rank = detect_fast(text)
        fingerprint = simhash64(text)
    except Exception as err:  # any failure of the extractor is recorded on the row, never raised
        message = " ".join(str(err).split())[:300]
        return MainContent(None, None, None, extractor_name(), f"{type(err).__name__}: {message}")
    return MainContent(text, None if language == UNKNOWN_LANGUAGE else language, fingerprint, extractor_name())


def nested_too_deep(markup: str) -> bool:
    """Whether the document nests elements more than :data:`MAX_DEPTH` deep (True also when
    Resiliparse cannot parse it), for a caller that extracts no main content: the check
    :func:`extract_main_content` makes, a lexbor parse and a CSS match (none below 16 KB, where the
    worst case is small anyway)."""
    from resiliparse.parse.html import HTMLTree  # noqa: PLC0415

    if len(markup) <= _CHECK_FROM:
        return False
    try:
        return _too_deep(HTMLTree.parse(markup), markup)
    except Exception:  # the caller then takes the parser that caps nesting
        return True


def _too_deep(tree: Any, markup: str) -> bool:
    document = tree.document
    return len(markup) > _CHECK_FROM and document is not None and document.query_selector(_TOO_DEEP) is not None
