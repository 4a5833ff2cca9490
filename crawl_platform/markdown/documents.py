"""Fills ``documents_markdown``: each HTML page version as Markdown with its published date, from the archive.

The ``documents_markdown`` asset calls :func:`land_markdown` as batches land. It finds the page
versions of the crawls that have a ``documents`` row (an HTML page) but no ``documents_markdown``
row yet, reads their stored responses from the raw archive
(:func:`crawl_platform.archive.reader.archived_responses`, never the network), extracts them with
:func:`crawl_platform.parse.markdown.extract_markdown` (trafilatura and htmldate, whose CPU per
page is why this is not on the crawl path) outside any lock, and inserts the rows in one
write transaction, skipping any another run inserted meanwhile, so the key ``(url, version)``
holds and a version is extracted once. Versions fetched with the archive off have no record and
are left out (``MarkdownReport.unarchived`` counts them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from crawl_platform.archive.reader import archived_responses
from crawl_platform.dedup.near_duplicates import UnknownCrawlError
from crawl_platform.parse.markdown import extract_markdown
from crawl_platform.store import crawls, documents_markdown
from crawl_platform.store.database import CrawlStore


@dataclass
class MarkdownReport:
    crawls: list[str] = field(default_factory=list)
    extracted: int = 0  # rows inserted
    with_markdown: int = 0
    with_date: int = 0
    errors: int = 0  # rows without Markdown (their error column says why)
    unarchived: int = 0  # HTML versions without an archive record: not extracted
    seconds: float = 0.0


def land_markdown(store: CrawlStore, crawl_ids: Sequence[str] = ()) -> MarkdownReport:
    """Extract and land every pending version of the crawls (every registered crawl if none given)."""
    clock = time.perf_counter()
    report = MarkdownReport()
    with store.read() as con:
        known = crawls.crawl_ids(con)
    unknown = sorted(set(crawl_ids) - known)
    if unknown:
        raise UnknownCrawlError(f"unknown crawl: {', '.join(unknown)} (crawls in the lake: "
                                f"{', '.join(sorted(known)) or 'none'})")
    report.crawls = sorted(set(crawl_ids) or known)
    rows: list[tuple[object, ...]] = []
    for crawl_id in report.crawls:
        with store.read() as con:
            pending = documents_markdown.pending_versions(con, crawl_id)
        report.unarchived += sum(1 for _url, _version, archived in pending if not archived)
        wanted = {(url, version) for url, version, archived in pending if archived}
        if not wanted:
            continue
        for response in archived_responses(store, crawl_id, sorted({u for u, _ in wanted}), latest_only=False):
            if (response.url, response.version) not in wanted:
                continue
            doc = extract_markdown(response.body, response.final_url, response.content_type)
            rows.append((response.url, response.version, doc.markdown, doc.published_date, doc.extractor, doc.error))
    table = pa.table({name: pa.array([r[k] for r in rows], kind) for k, (name, kind) in enumerate((
        ("url", pa.string()), ("version", pa.int32()), ("markdown", pa.string()), ("published_date", pa.date32()),
        ("extractor", pa.string()), ("error", pa.string())))})
    with store.write() as con:
        report.extracted = documents_markdown.insert_new(con, table)
    report.with_markdown = sum(1 for r in rows if r[2] is not None)
    report.with_date = sum(1 for r in rows if r[3] is not None)
    report.errors = sum(1 for r in rows if r[2] is None)
    report.seconds = time.perf_counter() - clock
    return report
