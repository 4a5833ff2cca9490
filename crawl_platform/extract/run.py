"""Bringing a crawl's records up to date with its rules, from the raw archive and never the network.

:func:`extract_crawl` is what the ``records`` asset and ``crawl-platform extract`` run: it reads the
crawl's stored rules, finds the page versions not yet extracted with them
(:func:`~crawl_platform.extract.records.pending_pages`: after a rule change, every page), reads
their responses from the archive (:func:`crawl_platform.archive.reader.archived_responses`),
applies the rules in a child process, each page within a deadline
(:class:`~crawl_platform.extract.bounded.BoundedExtractor`), and lands the results chunk by chunk,
each chunk one snapshot; only the landing takes the lake's write lock. The first chunk also
removes the rows older rules made, so a crawl's records always come from one set of rules. A
record the archive cannot give back, or a page too slow for the rules' selectors, is that page's
error; nothing stops the run but an unusable lake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from crawl_platform.archive.reader import ArchivedResponse, ArchiveReadError, archived_responses
from crawl_platform.extract.bounded import PAGE_SECONDS, BoundedExtractor
from crawl_platform.extract.engine import Extractor, PageExtraction
from crawl_platform.extract.records import (
    crawls_with_rules,
    land_extractions,
    pending_pages,
    stale_rows,
    stored_rules,
)
from crawl_platform.store.database import CrawlStore

CHUNK_PAGES = 250  # pages landed per transaction: bounded memory, a snapshot every few seconds

Progress = Callable[[int, int], None]  # (pages done, pages to do)


@dataclass
class ExtractReport:
    """What one extraction did; ``field_errors`` counts notes by field and kind (``title: missing``)."""

    crawl_id: str
    rules_digest: str
    pages: int = 0
    records: int = 0
    page_errors: int = 0
    replaced_pages: int = 0  # pages whose records older rules had made, now removed
    field_errors: Counter[str] = field(default_factory=Counter)
    snapshot_id: int | None = None
    examples: list[str] = field(default_factory=list)  # a few page errors, "url: error"
    unbounded: str = ""  # why pages were extracted without the per-page deadline (no child process)


def extract_crawl(store: CrawlStore, crawl_id: str, *, progress: Progress | None = None,
                  chunk_pages: int = CHUNK_PAGES, page_seconds: float = PAGE_SECONDS) -> ExtractReport:
    """Extract the crawl's pending pages with its stored rules, each within ``page_seconds``
    (raises ``UnknownCrawlError``)."""
    rules = stored_rules(store, crawl_id)
    extractor = Extractor(rules)
    report = ExtractReport(crawl_id, rules.digest, replaced_pages=stale_rows(store, crawl_id, rules.digest))
    pending = [(url, version) for url, version in pending_pages(store, crawl_id, rules.digest)
               if extractor.applies_to(url)]
    if progress is not None:
        progress(0, len(pending))
    drop_stale = report.replaced_pages > 0
    if not pending and drop_stale:
        report.snapshot_id = land_extractions(store, crawl_id, rules, [], drop_stale=True)
    with BoundedExtractor(rules, page_seconds) as bounded:
        for start in range(0, len(pending), chunk_pages):
            chunk = pending[start:start + chunk_pages]
            pages = [bounded.extract(r) if isinstance(r, ArchivedResponse) else r
                     for r in _responses(store, crawl_id, chunk)]
            report.snapshot_id = land_extractions(store, crawl_id, rules, pages, drop_stale=drop_stale)
            drop_stale = False
            _count(report, pages)
            if progress is not None:
                progress(start + len(chunk), len(pending))
    report.unbounded = bounded.fallback
    return report


def _responses(store: CrawlStore, crawl_id: str,
               chunk: Sequence[tuple[str, int]]) -> Iterator[ArchivedResponse | PageExtraction]:
    """The chunk's stored responses; a page whose record cannot be read comes back as a
    :class:`PageExtraction` carrying the archive's error instead."""
    wanted = dict(chunk)
    try:
        found = [r for r in archived_responses(store, crawl_id, list(wanted)) if wanted.get(r.url) == r.version]
    except ArchiveReadError:
        found = None  # one bad record or file: read page by page to tell which
    if found is not None:
        yield from found
        missing = set(wanted) - {r.url for r in found}
        for url in sorted(missing):  # a newer version landed meanwhile: the next run takes it
            yield PageExtraction(url, wanted[url], (), "archive: the version is no longer the latest")
        return
    for url, version in chunk:
        try:
            yield from (r for r in archived_responses(store, crawl_id, [url]) if r.version == version)
        except ArchiveReadError as err:
            yield PageExtraction(url, version, (), f"archive: {err}")


def _count(report: ExtractReport, pages: Sequence[PageExtraction]) -> None:
    for page in pages:
        report.pages += 1
        report.records += len(page.records)
        if page.error is not None:
            report.page_errors += 1
            if len(report.examples) < 5:
                report.examples.append(f"{page.url}: {page.error}")
        for record in page.records:
            for name, note in record.errors.items():
                report.field_errors[f"{name}: {note.split(':', 1)[0]}"] += 1



@dataclass(frozen=True)
class DueExtraction:
    """A crawl whose records are behind its rules: ``pending`` pages to extract (new pages, or
    all of them after a rule change) and ``stale`` pages whose records older rules made."""

    crawl_id: str
    rules_digest: str
    pending: int
    stale: int


def due_extractions(store: CrawlStore) -> list[DueExtraction]:
    """Every crawl with rules whose records are not up to date, in crawl-id order: what the
    records sensor materialises (one run per crawl)."""
    due = []
    for crawl_id, rules in sorted(crawls_with_rules(store).items()):
        extractor = Extractor(rules)
        pending = sum(1 for url, _ in pending_pages(store, crawl_id, rules.digest) if extractor.applies_to(url))
        stale = stale_rows(store, crawl_id, rules.digest)
        if pending or stale:
            due.append(DueExtraction(crawl_id, rules.digest, pending, stale))
    return due
