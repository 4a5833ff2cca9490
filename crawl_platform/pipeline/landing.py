"""Lands one fetched batch: its fetch results and parsed pages as the rows of one store transaction.

Called by the crawl batch after fetching and parsing; followed by :mod:`crawl_platform.frontier.frontier`,
which reads what landed here to grow the frontier. :func:`land_batch` builds the batch's rows as
Arrow tables and writes them in one transaction: versioned pages, documents and links
(:mod:`crawl_platform.store.pages`: a URL gets a new version only when its content hash differs
from its latest, so landing the same batch twice adds nothing, and a ``304 Not Modified`` adds
nothing either), the batch's items and offset ranges (:mod:`crawl_platform.store.batches`), what
the fetcher learned about its hosts (robots.txt, adaptive delay; :mod:`crawl_platform.store.hosts`)
and each fetched URL's revisit interval (:mod:`crawl_platform.store.revisits`).
Landing only writes: every page it lands comes parsed from the fetch step.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from crawl_platform.archive.writer import RecordPointer
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import parse_batch_key
from crawl_platform.fetch.fetcher import FetchRequest, FetchResult
from crawl_platform.parse.html import ParsedPage
from crawl_platform.render.results import PageRendering
from crawl_platform.states import BatchOutcome
from crawl_platform.store.batches import record_items, record_ranges
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.hosts import HostRecord, save_hosts
from crawl_platform.store.pages import KnownVersion, land_versions, latest_versions, versions_since
from crawl_platform.store.revisits import DEFAULT_REVISITS, RevisitPolicy, update_revisits


@dataclass(frozen=True)
class LandedBatch:
    new_versions: int
    documents: int
    links: int
    snapshot_id: int | None = None  # the lake snapshot the batch's transaction committed
    # Unchanged pages another batch landed a different version of since this one was read: their
    # body, left unparsed, would be a new version without its document, so they land nothing and
    # their items land ``postponed``, for a later batch to fetch and parse.
    refetch: frozenset[str] = frozenset()


def outcome_of(result: FetchResult | None, postponed: bool = False) -> BatchOutcome:
    """How a batch item ends (``batch_items.outcome``): ``postponed`` when the batch leaves it for a
    later one (see :func:`land_batch`), ``skipped`` when the run did not fetch it for another reason."""
    if result is None:
        return BatchOutcome.POSTPONED if postponed else BatchOutcome.SKIPPED
    if result.disallowed:
        return BatchOutcome.DISALLOWED
    if result.status is None or result.status >= 400:
        return BatchOutcome.FAILED
    return BatchOutcome.FETCHED  # a 304 too: the crawl has the page, in its latest version


def main_content_columns(parsed: Sequence[ParsedPage]) -> dict[str, pa.Array]:
    """The ``documents`` columns of the pages' main content (:mod:`crawl_platform.parse.main_text`)
    and of how the parse went (``parse_error``, ``links_truncated``)."""
    mains = [p.main for p in parsed]
    return {
        "main_text": pa.array([m.text if m else None for m in mains], pa.string()),
        "language": pa.array([m.language if m else None for m in mains], pa.string()),
        "simhash": pa.array([m.simhash if m else None for m in mains], pa.uint64()),
        "extractor": pa.array([m.extractor if m else None for m in mains], pa.string()),
        "main_text_error": pa.array([m.error if m else None for m in mains], pa.string()),
        "parse_error": pa.array([p.error for p in parsed], pa.string()),
        "links_truncated": pa.array([p.links_truncated for p in parsed], pa.bool_()),
    }


def land_batch(
    store: CrawlStore,
    batch_id: str,
    items: list[FrontierURL],
    results: dict[str, FetchResult],
    parsed: dict[str, ParsedPage],
    hosts: Sequence[HostRecord] = (),
    archived: Mapping[str, RecordPointer] | None = None,
    revisit: RevisitPolicy = DEFAULT_REVISITS,
    unchanged: Collection[str] = (),
    postponed: Collection[str] = (),
    rendering: Mapping[str, PageRendering] | None = None,
    streamed: StreamedPages | None = None,
    known: Mapping[str, KnownVersion] | None = None,
) -> LandedBatch:
    """Write the batch in one transaction; idempotent for the same ``batch_id`` and content.

    ``hosts`` are what the fetcher learned about the batch's hosts (``Fetcher.host_records``);
    ``archived`` is where each URL's response was archived (``pages.warc_*``, NULL without one).
    ``revisit`` is the adaptive revisit schedule the fetched URLs' intervals follow.
    ``unchanged`` are the pages the fetch step left unparsed because their body was their latest
    version's (:attr:`~crawl_platform.fetch.results.FetchRequest.known_hash`): they land no new
    version. One that another batch landed a different version of since this one was read would
    land without its document, so it lands nothing (:attr:`LandedBatch.refetch`): its items land
    ``postponed``, and a later batch fetches and parses it.
    ``postponed`` are the URLs left unfetched when the batch's byte budget ran out: their items
    land ``postponed``, and the batch's expansion publishes them again.
    ``rendering`` is how the render step dealt with each page of a crawl that renders
    (``pages.rendered``, ``render_*``); its parse of a rendered page is in ``parsed`` already.
    ``streamed`` are the pages the fetch steps landed already (:func:`land_pages`): only their items
    and revisits are written here, and their versions, documents and links count as the batch's.
    ``known`` are the latest versions the batch's reader found (:func:`known_versions`): landing
    then reads only the versions committed since.
    """
    pointers = archived or {}
    renders = rendering or {}
    streamed = streamed or StreamedPages()
    crawl_of: dict[str, str] = {}
    for item in items:
        crawl_of.setdefault(item.url, item.crawl_id)
    parsed = {url: page for url, page in parsed.items() if url not in streamed.urls}
    landable = [r for r in results.values() if not r.disallowed and not r.not_modified and r.url not in streamed.urls]
    hashes = {r.url: r.content_hash for r in landable}
    tables = _page_tables(landable, crawl_of, hashes, parsed, pointers, renders)
    batch_items = _items_table(items, results, postponed)
    with store.write() as con:
        refetch = _changed_since_read(con, unchanged, hashes, parsed, known or {})
        if refetch:  # rare: two batches of one URL landing at once (a partition materialised again by hand)
            landable = [r for r in landable if r.url not in refetch]
            results = {url: r for url, r in results.items() if url not in refetch}
            tables = _page_tables(landable, crawl_of, hashes, parsed, pointers, renders)
            batch_items = _items_table(items, results, {*postponed, *refetch})
        pages, docs, links = tables
        landed = land_versions(con, batch_id, pages, docs, links, known)
        new_versions = landed.versions
        record_items(con, batch_id, batch_items)
        _record_ranges(con, batch_id)
        save_hosts(con, hosts, datetime.now(UTC).replace(tzinfo=None))
        changed = set(new_versions.column("url").to_pylist()) | streamed.changed
        checked = [i for i in items if (r := results.get(i.url)) is not None and not r.disallowed]
        update_revisits(con, pa.table({
            "crawl_id": pa.array([i.crawl_id for i in checked], pa.string()),
            "url": pa.array([i.url for i in checked], pa.string()),
            "depth": pa.array([i.depth for i in checked], pa.int32()),
            "changed": pa.array([i.url in changed for i in checked], pa.bool_()),
        }), revisit)
    return LandedBatch(
        new_versions=new_versions.num_rows + len(streamed.changed),
        documents=landed.documents + streamed.documents,
        links=landed.links + streamed.links,
        snapshot_id=store.last_snapshot_id,
        refetch=frozenset(refetch),
    )


@dataclass
class StreamedPages:
    """The pages a fetch step landed while it fetched (:mod:`crawl_platform.pipeline.streaming`),
    which the batch's landing leaves out of its own writes and counts as its own."""

    urls: set[str] = field(default_factory=set)  # every page landed (a new version or not)
    changed: set[str] = field(default_factory=set)  # those that landed as a new version
    documents: int = 0
    links: int = 0
    bytes: int = 0  # of their bodies, which the fetch step let go of once they landed
    rounds: int = 0  # commits

    def add(self, other: StreamedPages) -> None:
        self.urls |= other.urls
        self.changed |= other.changed
        self.documents += other.documents
        self.links += other.links
        self.bytes += other.bytes
        self.rounds += other.rounds


def land_pages(store: CrawlStore, batch_id: str, results: Sequence[FetchResult], crawl_of: Mapping[str, str],
               parsed: Mapping[str, ParsedPage], archived: Mapping[str, RecordPointer],
               known: Mapping[str, KnownVersion] | None = None) -> StreamedPages:
    """Write ``results`` (fetched, neither disallowed nor a 304) as the ``batch_id``'s ``pages``,
    ``documents`` and ``links`` rows in one transaction, before the batch lands: a page becomes
    readable within seconds of its fetch. ``crawl_of`` names each page's crawl; ``parsed`` holds the
    parse of each HTML page among them; ``known`` as for :func:`land_batch`. Landing a page again
    adds no version."""
    hashes = {r.url: r.content_hash for r in results}
    pages, docs, links = _page_tables(list(results), crawl_of, hashes, parsed, archived, {})
    with store.write() as con:
        landed = land_versions(con, batch_id, pages, docs, links, known)
    return StreamedPages({r.url for r in results}, set(landed.versions.column("url").to_pylist()),
                         documents=landed.documents, links=landed.links,
                         bytes=sum(len(r.body) for r in results), rounds=1)


def _page_tables(landable: list[FetchResult], crawl_of: Mapping[str, str], hashes: Mapping[str, str],
                 parsed: Mapping[str, ParsedPage], pointers: Mapping[str, RecordPointer],
                 renders: Mapping[str, PageRendering]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The batch's rows for ``pages``, ``documents`` and ``links``, before versioning."""
    done = [renders.get(r.url) for r in landable]
    dom = [d.pointer if d is not None else None for d in done]
    pages = pa.table({
        "url": pa.array([r.url for r in landable], pa.string()),
        "crawl_id": pa.array([crawl_of[r.url] for r in landable], pa.string()),
        "status": pa.array([r.status for r in landable], pa.int32()),
        "fetched_at": pa.array([r.fetched_at for r in landable], pa.timestamp("us")),
        "content_hash": pa.array([hashes[r.url] for r in landable], pa.string()),
        "content_type": pa.array([r.content_type for r in landable], pa.string()),
        "final_url": pa.array([r.final_url for r in landable], pa.string()),
        "error": pa.array([r.error for r in landable], pa.string()),
        "content_length": pa.array([len(r.body) for r in landable], pa.int64()),
        "elapsed_ms": pa.array([r.elapsed_ms for r in landable], pa.float64()),
        "etag": pa.array([r.etag for r in landable], pa.string()),
        "last_modified": pa.array([r.last_modified for r in landable], pa.string()),
        "redirect_chain": pa.array([list(r.redirect_chain) for r in landable], pa.list_(pa.string())),
        "charset": pa.array([p.charset if (p := parsed.get(r.url)) else None for r in landable], pa.string()),
        "warc_file": pa.array([w.warc_file if (w := pointers.get(r.url)) else None for r in landable], pa.string()),
        "warc_offset": pa.array([w.offset if (w := pointers.get(r.url)) else None for r in landable], pa.int64()),
        "warc_length": pa.array([w.length if (w := pointers.get(r.url)) else None for r in landable], pa.int64()),
        "rendered": pa.array([d.rendered if d is not None else None for d in done], pa.bool_()),
        "render_reason": pa.array([d.reason if d is not None else None for d in done], pa.string()),
        "render_error": pa.array([d.error if d is not None else None for d in done], pa.string()),
        "render_refused": pa.array([list(d.refused) if d is not None and d.refused else None for d in done],
                                   pa.list_(pa.string())),
        "render_warc_file": pa.array([p.warc_file if p else None for p in dom], pa.string()),
        "render_warc_offset": pa.array([p.offset if p else None for p in dom], pa.int64()),
        "render_warc_length": pa.array([p.length if p else None for p in dom], pa.int64()),
    })
    # Typed columns throughout: an empty batch must not hand the SQL null-typed columns.
    docs = pa.table({
        "url": pa.array(list(parsed), pa.string()),
        "title": pa.array([p.title for p in parsed.values()], pa.string()),
        "text": pa.array([p.text for p in parsed.values()], pa.string()),
        **main_content_columns(list(parsed.values())),
    })
    link_rows = [(url, dst, anchor) for url, page in parsed.items() for dst, anchor in page.links]
    links = pa.table({
        "url": pa.array([r[0] for r in link_rows], pa.string()),
        "dst_url": pa.array([r[1] for r in link_rows], pa.string()),
        "anchor_text": pa.array([r[2] for r in link_rows], pa.string()),
    })
    return pages, docs, links


def _items_table(items: list[FrontierURL], results: Mapping[str, FetchResult], postponed: Collection[str],
                 ) -> pa.Table:
    """The batch's ``batch_items`` rows: each item and how it ended."""
    return pa.table({
        "crawl_id": pa.array([i.crawl_id for i in items], pa.string()),
        "url": pa.array([i.url for i in items], pa.string()),
        "depth": pa.array([i.depth for i in items], pa.int32()),
        "outcome": pa.array([outcome_of(results.get(i.url), i.url in postponed) for i in items], pa.string()),
    })


def known_versions(requests: Iterable[FetchRequest]) -> dict[str, KnownVersion]:
    """The latest version each request's reader found of its URL, and in which lake snapshot
    (:attr:`~crawl_platform.fetch.results.FetchRequest.known_as_of`); URLs not read are left out."""
    return {r.url: KnownVersion(r.known_as_of, r.known_version, r.known_hash)
            for r in requests if r.known_as_of is not None}


def _changed_since_read(con: Any, unchanged: Collection[str], hashes: Mapping[str, str],
                        parsed: Mapping[str, ParsedPage], known: Mapping[str, KnownVersion]) -> set[str]:
    """The pages left unparsed as unchanged whose latest version is no longer their content (another
    batch landed the URL since this one was read); one read, in the landing transaction, of the
    versions committed since the read when the reader's snapshot is ``known``."""
    wanted = [url for url in unchanged if url in hashes and url not in parsed]
    if not wanted:
        return set()
    since = versions_since(con, known, wanted) if all(url in known for url in wanted) else None
    latest = ({url: digest for url, (_, digest) in since.items()} if since is not None
              else {url: v.content_hash for url, v in latest_versions(con, wanted).items()})
    return {url for url in wanted if latest.get(url) != hashes[url]}


def _record_ranges(con: Any, batch_id: str) -> None:
    """The frontier offset ranges the batch's key names, in ``batch_ranges`` (none for an id that
    is not a batch key); see :mod:`crawl_platform.pipeline.continuation`. A batch landed again
    (a re-materialisation) records its ranges again, which changes no partition's last end."""
    try:
        epoch, ranges = parse_batch_key(batch_id)
    except ValueError:
        return
    record_ranges(con, batch_id, epoch, [r.partition for r in ranges], [r.start for r in ranges],
                  [r.end for r in ranges])
