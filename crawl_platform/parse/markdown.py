"""A stored page as Markdown with its published date: trafilatura and htmldate, off the crawl path.

trafilatura costs more CPU a page than the crawl's whole fetch, parse and landing of it
(measured by ``benchmarks/markdown_rate.py``), so this runs in
the ``documents_markdown`` asset (:mod:`crawl_platform.markdown.documents`), which reads the bodies
from the raw archive (:mod:`crawl_platform.archive.reader`), never from the network. The body is
decoded once (:mod:`crawl_platform.parse.encoding`, as the crawl's parser does); trafilatura
extracts the main content as Markdown (headings, lists, tables, code), and htmldate finds the
original publication date in the markup (meta tags, structured data, the URL, then the text). Both
get parsed trees or text, never a URL, so neither fetches anything. Nothing raises for a page:
a failure comes back as a :class:`MarkdownDocument` with no Markdown and the error's name and
message.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date
from importlib.metadata import version

from crawl_platform.parse.encoding import decode_html


@dataclass(frozen=True)
class MarkdownDocument:
    """What lands in ``documents_markdown``."""

    markdown: str | None  # None when trafilatura found no main content or failed (``error`` says which)
    published_date: date | None
    extractor: str  # e.g. "trafilatura 2.3.1; htmldate 1.11.0"
    error: str | None = None


@functools.cache
def extractor_name() -> str:
    """The two extractors and their installed versions, recorded on every row."""
    return f"trafilatura {version('trafilatura')}; htmldate {version('htmldate')}"


def extract_markdown(body: bytes, url: str, content_type: str | None = None) -> MarkdownDocument:
    """Markdown and published date of one stored HTML response; ``url`` is its final URL."""
    import htmldate  # noqa: PLC0415 - only the downstream asset pays for importing them
    import trafilatura  # noqa: PLC0415

    try:
        text = decode_html(body, content_type).text
        tree = trafilatura.load_html(text)
        if tree is None:
            return MarkdownDocument(None, None, extractor_name(), "no HTML document in the body")
        found = htmldate.find_date(tree, original_date=True, url=url)
        markdown = trafilatura.extract(text, url=url, output_format="markdown", include_links=False,
                                       include_comments=False, with_metadata=False)
    except Exception as err:  # any failure of either extractor is recorded on the row, never raised
        message = " ".join(str(err).split())[:300]
        return MarkdownDocument(None, None, extractor_name(), f"{type(err).__name__}: {message}")
    published = date.fromisoformat(found) if found else None
    error = None if markdown else "no main content found"
    return MarkdownDocument(markdown or None, published, extractor_name(), error)
