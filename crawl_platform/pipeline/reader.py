"""Reading one crawl batch: its offset ranges from the bus, decoded and checked against the lake.

:class:`BatchReader` is a batch run's first step (:mod:`crawl_platform.pipeline.batch` runs the
rest): it decodes the batch's frontier messages (bad ones go to the dead-letter topic), keeps
only URLs their crawl admitted, holds those of paused or cancelled crawls, and works out what
each URL's fetch needs. :class:`PreparedBatch` is what it hands the fetch shards, and
:class:`BatchReport` the figures every later step adds to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from crawl_platform.bus.base import BatchLostError, Bus, Record
from crawl_platform.bus.messages import DeadLetter, FrontierURL, MessageDecodeError, decode_frontier_url
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_dead_letters, publish_frontier
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.states import CrawlState
from crawl_platform.store import crawls
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.engine import current_snapshot
from crawl_platform.store.hosts import HostRecord, load_hosts
from crawl_platform.store.pages import latest_versions
from crawl_platform.urls import CrawlScope, InvalidURLError, canonicalize

_NO_RENDER = ("never", False, "")  # a crawl's rendering terms when it renders nothing

@dataclass
class BatchReport:
    """Figures of one batch, reported as Dagster metadata and by benchmarks."""

    batch_id: str
    messages: int = 0
    dead_letters: int = 0
    skipped: int = 0
    fetched: int = 0
    failed: int = 0
    disallowed: int = 0
    not_modified: int = 0
    unchanged: int = 0  # 200s whose body was the latest version's: not parsed (FetchRequest.known_hash)
    deferred: int = 0  # URLs another crawl of the batch fetched its own way: left for a later batch
    postponed: int = 0  # URLs not fetched because the batch's bodies reached CRAWL_BATCH_MAX_BYTES
    rendered: int = 0  # pages rendered in a browser (crawl_platform.render)
    bytes: int = 0
    new_versions: int = 0
    links: int = 0
    streamed: int = 0  # pages the fetch steps landed in rounds while they fetched (CRAWL_LAND_EVERY_S)
    held: int = 0  # items of paused or cancelled crawls, not fetched (held at plan time or by the fetch steps)
    snapshot_id: int | None = None  # the lake snapshot the batch landed in
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class PreparedBatch:
    """A batch read from Kafka and decoded, with what its fetch shards need."""

    batch_id: str
    items: list[FrontierURL]  # every decoded message of a known crawl (duplicates included)
    requests: list[FetchRequest]  # what to fetch (URLs the crawl finished are left out)
    hosts: list[HostRecord]  # what earlier runs learned about the batch's hosts
    report: BatchReport
    lost: str = ""  # why the batch could not be read (the broker lost it): nothing to fetch or land

    def shards(self, count: int, min_urls: int = 1) -> list[list[FetchRequest]]:
        """Split the requests into at most ``count`` non-empty shards of whole hosts, balanced by
        request count (largest host first onto the lightest shard), and no more shards than give
        ``min_urls`` each (a step per handful of URLs costs more than it saves); the same batch
        always gives the same shards."""
        by_host: dict[str, list[FetchRequest]] = {}
        for request in self.requests:
            by_host.setdefault(origin_of(request.url), []).append(request)
        worth = -(-len(self.requests) // max(1, min_urls))
        loads: list[list[FetchRequest]] = [[] for _ in range(max(1, min(count, len(by_host), worth)))]
        for host in sorted(by_host, key=lambda h: (-len(by_host[h]), h)):
            min(loads, key=len).extend(by_host[host])
        return [shard for shard in loads if shard]

    def hosts_of(self, requests: list[FetchRequest]) -> list[HostRecord]:
        origins = {origin_of(r.url) for r in requests}
        return [h for h in self.hosts if h.origin in origins]



class BatchReader:
    """Reads a batch's offset ranges from the bus and works out what to fetch from the store (one
    short read). It writes nothing to the store; it publishes what the batch will not fetch: bad
    messages (undecodable, of an unknown crawl, outside the crawl's frontier) to the dead-letter
    topic, and URLs that another crawl of the batch fetches its own way back to the frontier topic,
    for a later batch."""

    def __init__(self, bus: Bus, store: CrawlStore, read_model: FrontierReadModel) -> None:
        self.bus = bus
        self.store = store
        self.read_model = read_model

    def prepare(self, batch_id: str, offsets: OffsetRange | list[OffsetRange],
                refetch_done: bool = True) -> PreparedBatch:
        """The decoded batch; with ``refetch_done`` False, URLs the crawl already finished are left
        out (a duplicate delivery), otherwise the whole batch is fetched again (a
        re-materialisation). A batch the broker no longer holds comes back empty with ``lost``
        set: retrying cannot bring it back, and its URLs are re-published from the store once the
        sensor sees the loss, so skipping it loses nothing."""
        ranges = [offsets] if isinstance(offsets, OffsetRange) else list(offsets)
        try:
            return self._prepare(batch_id, ranges, refetch_done)
        except BatchLostError as err:
            return PreparedBatch(batch_id, [], [], [], BatchReport(batch_id), lost=str(err))

    def _prepare(self, batch_id: str, ranges: list[OffsetRange], refetch_done: bool) -> PreparedBatch:
        report = BatchReport(batch_id)
        clock = time.perf_counter()
        decoded: list[tuple[FrontierURL, Record]] = []
        letters = []
        for offset_range in ranges:
            records = self.bus.read_range(self.bus.frontier_topic, offset_range)
            report.messages += len(records)
            for rec in records:
                try:
                    item = decode_frontier_url(rec.value)
                    decoded.append((FrontierURL(item.crawl_id, canonicalize(item.url), item.depth), rec))
                except (MessageDecodeError, InvalidURLError) as err:
                    letters.append(DeadLetter.for_payload(str(err), self.bus.frontier_topic, rec.partition,
                                                          rec.offset, rec.value or b""))
        states = self.read_model.crawl_states({i.crawl_id for i, _rec in decoded})
        # Only URLs their crawl admitted are fetched, at the depth it admitted them: a message
        # from another producer cannot widen a crawl's scope or caps.
        rows = self.read_model.frontier_rows([i for i, _rec in decoded if i.crawl_id in states])
        items = []
        for item, rec in decoded:  # the letter keeps the message as it was, and where it was
            row = rows.get((item.crawl_id, item.url))
            if item.crawl_id not in states:
                reason = f"unknown crawl {item.crawl_id!r}"
            elif row is None:
                reason = f"{item.url} is not in the frontier of crawl {item.crawl_id} (outside its scope or caps)"
            else:
                items.append(item if item.depth == row.depth else FrontierURL(item.crawl_id, item.url, row.depth))
                continue
            letters.append(DeadLetter.for_payload(reason, self.bus.frontier_topic, rec.partition, rec.offset,
                                                  rec.value or b""))
        if letters:
            publish_dead_letters(self.bus, letters)
        report.dead_letters = len(letters)
        done = set() if refetch_done else {key for key, row in rows.items() if not row.state.pending}
        # A paused or cancelled crawl's URLs are not fetched: they land as ``skipped`` items, and
        # their rows stay ``paused`` (resume publishes them again) or ``cancelled``.
        held = {c for c, state in states.items() if state is not CrawlState.ACTIVE}
        report.held = sum(1 for i in items if i.crawl_id in held)
        to_fetch = [i for i in items if (i.crawl_id, i.url) not in done and i.crawl_id not in held]
        requests, hosts, deferred = self._fetch_requests(to_fetch)
        if deferred:
            # A URL that another crawl of this batch fetches its own way first: back on the topic
            # for a later batch (it stays queued), so each crawl's User-Agent and scope decide its fetch.
            later = {(i.crawl_id, i.url): i for i in deferred}
            publish_frontier(self.bus, list(later.values()))
            items = [i for i in items if (i.crawl_id, i.url) not in later]
            report.deferred = len(later)
        report.seconds["read"] = time.perf_counter() - clock
        return PreparedBatch(batch_id, items, requests, hosts, report)

    def _fetch_requests(self, items: list[FrontierURL],
                        ) -> tuple[list[FetchRequest], list[HostRecord], list[FrontierURL]]:
        """What the fetcher needs to know per URL, read in one go (one short read per batch):
        each crawl's User-Agent and scope, the validators of each page's latest version, and what
        earlier runs learned about the batch's hosts (which primes the fetchers). A URL that
        several crawls of the batch want is fetched once for all of them when their User-Agent and
        scope agree (each crawl still gets its own ``batch_items`` row); the items of crawls that
        would fetch it another way come back apart (the third value), to be fetched later."""
        if not items:
            return [], [], []
        crawl_ids = sorted({i.crawl_id for i in items})
        with self.store.read() as con:
            terms = crawls.fetch_terms(con, crawl_ids)
            latest = latest_versions(con, sorted({i.url for i in items}))
            snapshot = current_snapshot(con, self.store.alias)
            hosts = load_hosts(con, {origin_of(i.url) for i in items})
        agents: dict[str, str | None] = {}
        scopes: dict[str, CrawlScope] = {}
        politeness: dict[str, tuple[float | None, int]] = {}  # the crawl's own delay and concurrency
        rendering: dict[str, tuple[str, bool, str]] = {}  # its render mode, screenshots, extraction rules
        for crawl_id, scope, seeds, allow, deny, agent, delay_ms, concurrency, render, shots, rules in terms:
            agents[crawl_id] = agent or None
            scopes[crawl_id] = CrawlScope.from_row(scope, seeds, allow, deny, crawl_id)
            politeness[crawl_id] = (delay_ms / 1000.0 if delay_ms else None, concurrency or 0)
            rendering[crawl_id] = (render or "never", bool(shots), (rules or "") if render == "auto" else "")
        fetch_as: dict[str, tuple[str | None, CrawlScope | None, str]] = {}
        chosen: list[FrontierURL] = []
        deferred: list[FrontierURL] = []
        for item in items:  # the first crawl of the batch to want a URL fetches it its own way
            way = (agents.get(item.crawl_id), scopes.get(item.crawl_id), rendering.get(item.crawl_id, _NO_RENDER)[0])
            (chosen if fetch_as.setdefault(item.url, way) == way else deferred).append(item)
        wanted: dict[str, list[str]] = {}  # the crawls that fetch each URL
        for item in chosen:
            wanted.setdefault(item.url, []).append(item.crawl_id)
        return [
            FetchRequest(i.url, user_agent=agents.get(i.crawl_id), crawl_ids=tuple(dict.fromkeys(wanted[i.url])),
                         host_delay_s=politeness.get(i.crawl_id, (None, 0))[0],
                         host_concurrency=politeness.get(i.crawl_id, (None, 0))[1],
                         in_scope=scopes[i.crawl_id].admits if i.crawl_id in scopes else None,
                         etag=v.etag if (v := latest.get(i.url)) else None,
                         last_modified=v.last_modified if v else None, known_hash=v.content_hash if v else None,
                         known_version=v.version if v else 0, known_as_of=snapshot,
                         render=(r := rendering.get(i.crawl_id, _NO_RENDER))[0], screenshots=r[1], extract_rules=r[2])
            for i in chosen
        ], list(hosts.values()), deferred
