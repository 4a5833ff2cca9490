"""One fetch shard of a batch: fetch, archive and parse whole hosts in one step.

A shard needs neither the bus nor the store, so a run can fetch several in separate processes;
its :class:`ShardResult` is what the landing step (``batch.BatchLander``) writes: every page
parsed here, so landing only writes. Given a way to read its crawls' states (``crawl_states``,
the lake's), it stops a paused or cancelled crawl's requests within about a second
(:mod:`.control_watch`); without one, the states its plan step read hold for the whole shard.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from crawl_platform.archive.writer import RecordPointer, archive_results, shard_file_name
from crawl_platform.fetch.fetcher import Fetcher, FetchRequest, FetchResult
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.html import DEFAULT_ENGINE, ParsedPage, ParserEngine
from crawl_platform.parse.pool import ParsePool, ParseWorkers
from crawl_platform.pipeline.control_watch import ControlWatch, CrawlStates
from crawl_platform.pipeline.landing import StreamedPages
from crawl_platform.render.results import PageRendering, RenderContext, RenderTerms, ShardRendering
from crawl_platform.storage import Folder
from crawl_platform.store.hosts import HostRecord

if TYPE_CHECKING:
    from crawl_platform.pipeline.streaming import StreamingLanding


@dataclass
class ShardResult:
    """What one fetch shard hands to the landing step (pickled between steps of a run)."""

    results: dict[str, FetchResult]
    parsed: dict[str, ParsedPage]
    hosts: list[HostRecord]  # what the shard learned about its hosts (robots.txt, gaps)
    seconds: dict[str, float]
    archived: dict[str, RecordPointer] = field(default_factory=dict)  # by URL: its response's WARC record
    # URLs whose body was their latest stored version's (FetchRequest.known_hash): not parsed, as
    # they land no new version (should another batch have landed the URL since, landing leaves it
    # for a later batch, which parses it: see land_batch).
    unchanged: set[str] = field(default_factory=set)
    # URLs not fetched because the shard's bodies reached its byte budget: a later batch fetches them.
    postponed: list[str] = field(default_factory=list)
    # For the render step: the URLs of crawls that render (None: nothing to render, no render step
    # work); after it, each page it decided on (crawl_platform.render).
    render: RenderContext | None = None
    rendering: dict[str, PageRendering] = field(default_factory=dict)
    # URLs not fetched (or not rendered) because every crawl that wanted them was paused or
    # cancelled while the shard ran (ControlWatch): they land as ``skipped`` items, as the plan
    # step's held URLs do, leaving their rows ``paused`` (resume publishes them again) or ``cancelled``.
    held: list[str] = field(default_factory=list)
    # The pages the shard landed in rounds while it fetched (crawl_platform.pipeline.streaming): in
    # ``results`` without their bodies and headers, their parses not in ``parsed``.
    streamed: StreamedPages = field(default_factory=StreamedPages)

    def with_rendering(self, rendered: ShardRendering) -> ShardResult:
        """This shard with what its render step gave: the rendered pages' parses in place of the
        HTTP bodies', their renderings, and the hosts that need rendering marked. A page the render
        step held (its crawls paused or cancelled before its turn) loses its fetch result too, so
        it lands ``skipped`` and is fetched and rendered after a resume."""
        marked = rendered.hosts_needing
        hosts = [replace(h, render_needed=True) if h.origin in marked else h for h in self.hosts]
        hosts += [HostRecord(origin, render_needed=True) for origin in sorted(marked - {h.origin for h in hosts})]
        dropped = set(rendered.held)
        return replace(self, parsed={u: p for u, p in {**self.parsed, **rendered.parsed}.items() if u not in dropped},
                       hosts=hosts,
                       seconds={**self.seconds, "render": self.seconds.get("render", 0.0) + rendered.seconds},
                       rendering={**self.rendering, **rendered.rendering},
                       results={u: r for u, r in self.results.items() if u not in dropped},
                       held=[*self.held, *rendered.held])


class ShardFetcher:
    """Fetches, archives and parses one shard of whole hosts; needs neither the bus nor the store.
    With an ``archive`` folder (local or object storage), the shard's responses go to one new WARC
    file there (complete there before this returns, so before any row points into it). Its parse workers are started at
    the first shard and parse every later one too (a continuing run's next batches), until :meth:`close`;
    or they are lent by an owner that keeps them beyond it (``workers``)."""

    def __init__(self, fetcher: Fetcher, parser: ParserEngine = DEFAULT_ENGINE, archive: Folder | None = None, *,
                 main_content: bool = True, parse_workers: int = 0, workers: ParseWorkers | None = None,
                 workers_from: int = 0, max_links: int = MAX_LINKS_PER_PAGE, max_bytes: int | None = None,
                 crawl_states: CrawlStates | None = None, streaming: StreamingLanding | None = None) -> None:
        self.fetcher = fetcher
        # Lands the shard's pages in rounds while it fetches (CRAWL_LAND_EVERY_S); None: all with the batch.
        self.streaming = streaming
        # Reads the crawls' states from the lake, so that a pause or cancel stops the shard's requests
        # for them within about a second (ControlWatch); None: the states read at plan time hold.
        self.crawl_states = crawl_states
        self.parser = parser
        self.archive = archive
        self.main_content = main_content  # CRAWL_MAIN_CONTENT: main text, language, SimHash per page
        self.max_links = max_links  # CRAWL_MAX_LINKS_PER_PAGE
        self.max_bytes = max_bytes  # CRAWL_BATCH_MAX_BYTES: bodies a shard holds (None: no limit)
        self.parse_workers = parse_workers  # CRAWL_PARSE_WORKERS: processes parsing while the fetch goes on
        self.fallback = ""  # why the last shard was parsed in this process although workers were asked for
        self.workers_from = workers_from  # CRAWL_PARSE_WORKERS_FROM: a smaller shard starts none
        # Started at the first shard and kept for the next ones until close(); or ``workers``, which
        # their owner lends (a Dagster run's steps share one set) and close() leaves running.
        self._workers: ParseWorkers | None = workers if parse_workers > 0 else None
        self._owns_workers = self._workers is None

    def fetch(self, requests: list[FetchRequest], hosts: list[HostRecord], batch_id: str = "",
              shard: str = "s0", max_bytes: int | None = None) -> ShardResult:
        """Fetch and parse one shard (whole hosts only, so a host's politeness stays here),
        starting from what earlier runs learned about its hosts; ``batch_id`` and ``shard`` name
        its WARC file. Once its bodies reach ``max_bytes`` (default: the fetcher's own budget) it
        starts no new request, and the URLs left are the result's ``postponed``. While it fetches,
        a :class:`ControlWatch` reads the crawls' states (with ``crawl_states``): a URL whose
        crawls are all paused or cancelled by its turn is not requested, and is the result's ``held``."""
        self.fetcher.prime(hosts)
        # With parse workers, pages are parsed in other processes as they arrive, so "parse" is
        # only the last chunks (this process parses those no worker has taken yet, after writing
        # the shard's WARC file while the workers go on). Without, the pool keeps them and parses them here after
        # the fetch, not page by page inside it: on one host without a delay, interleaving the two
        # in one process costs more CPU (measured by benchmarks/fetch_hosts.py).
        if requests and self.parse_workers > 0 and self._workers is None and len(requests) >= self.workers_from:
            self._workers = ParseWorkers(self.parse_workers)
        known = {r.url: r.known_hash for r in requests if r.known_hash}
        unchanged: set[str] = set()
        with ParsePool(self._workers if requests and self._workers is not None else 0, self.parser,
                       main_content=self.main_content, max_links=self.max_links) as pool:

            stream = self.streaming.start(batch_id, shard, requests, pool) if self.streaming and requests else None

            def parse(result: FetchResult) -> None:  # on the fetch threads
                same = bool(known) and result.is_html and known.get(result.url) == result.content_hash
                if same:
                    unchanged.add(result.url)  # the page the lake has: a parse would land nothing
                else:
                    pool.add(result)
                if stream is not None:
                    stream.add(result, landable=not same)

            self.fallback = pool.fallback
            clock = time.perf_counter()
            watch = ControlWatch.of(self.crawl_states, {c for r in requests for c in r.crawl_ids})
            try:
                results = self.fetcher.fetch_all(requests, parse, max_bytes or self.max_bytes,
                                                 watch.holds if watch is not None else None)
            finally:
                streamed, harvested = stream.finish() if stream is not None else (StreamedPages(), {})
            results.update(stream.results if stream is not None else {})
            held = set(watch.passed_over) if watch is not None else set()
            seconds = {"fetch": time.perf_counter() - clock}
            archived: dict[str, RecordPointer] = {}
            if self.archive is not None:  # while the workers parse the last pages
                clock = time.perf_counter()
                archived, not_archived = archive_results(self.archive, shard_file_name(batch_id, shard),
                                                         [r for r in results.values() if r.url not in streamed.urls],
                                                         {"isPartOf": batch_id or "batch", "shard": shard})
                for url, error in not_archived.items():  # the page lands all the same, with the reason
                    results[url] = replace(results[url], error=results[url].error or f"not archived: {error}")
                seconds["archive"] = time.perf_counter() - clock
            clock = time.perf_counter()
            by_url = {**harvested, **pool.parsed()}
            seconds["parse"] = time.perf_counter() - clock
        parsed: dict[str, ParsedPage] = {url: by_url[url] for url in results if url in by_url}
        learned = self.fetcher.host_records({origin_of(r.url) for r in requests})
        left = list(dict.fromkeys(r.url for r in requests if r.url not in results))
        return ShardResult(results, parsed, learned, seconds, archived, unchanged,
                           [u for u in left if u not in held], self._render_context(requests, hosts, learned),
                           held=[u for u in left if u in held], streamed=streamed)

    def _render_context(self, requests: list[FetchRequest], hosts: list[HostRecord],
                        learned: list[HostRecord]) -> RenderContext | None:
        """What the render step needs for the shard's URLs of crawls that render; None without any."""
        terms = {r.url: RenderTerms(r.render, r.user_agent or self.fetcher.user_agent, r.host_delay_s,
                                    r.screenshots, r.extract_rules, r.crawl_ids)
                 for r in requests if r.render != "never"}
        if not terms:
            return None
        robots = {h.origin: h.robots_body for h in [*hosts, *learned]
                  if h.robots_body is not None and h.robots_status is not None and h.robots_status < 400}
        return RenderContext(terms, {h.origin for h in hosts if h.render_needed}, robots)

    def close(self) -> None:
        """Ends the parse workers and the fetcher's connections."""
        if self._workers is not None and self._owns_workers:
            self._workers.close()
        self._workers = None
        self._owns_workers = True  # workers a later shard starts are its own
        self.fetcher.close()
