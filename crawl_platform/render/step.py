"""The render step: a fetched shard's pages that need a browser, rendered, archived and parsed again.

:class:`ShardRenderer` takes what a fetch step gave (:class:`~crawl_platform.pipeline.shard.ShardResult`)
and hands back the same shard with its rendered pages' parses replaced by the parse of their
rendered DOM, each page's :class:`~crawl_platform.render.results.PageRendering`, and the hosts
found to need rendering. A shard of crawls that never render passes through untouched, without
importing Playwright or starting a browser. It needs neither the bus nor the store, like the fetch
step, so a Dagster run gives it a step of its own (on a Celery queue of its own when scaled out).

Per page: the decision (:mod:`.decision`); then :class:`~.browsers.BrowserPool` loads the page from
its archived response through the guard proxy, with the crawl's User-Agent, its gap per host
counted from the fetch step's last request to the host, and the host's robots.txt for every
request of the page to that host, over HTTP or HTTPS, and out through the crawl's proxies
(``CRAWL_PROXIES``) when it has any. A page whose rendering fails keeps its HTTP parse and records
why. With ``crawl_states``, a :class:`~crawl_platform.pipeline.control_watch.ControlWatch` reads
the crawls' states while the step renders: a page whose crawls are all paused or cancelled by its
turn is not loaded, and lands ``skipped`` (its fetch result dropped), to be fetched and rendered
after a resume. The rendered DOMs (and screenshots) go to one new WARC file of the shard, each a
``conversion`` record pointing at the page's response record.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from crawl_platform.archive.writer import RecordPointer, WarcFile, shard_file_name
from crawl_platform.config import Settings
from crawl_platform.config.fetch import FetchSettings
from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.fetch.politeness import HostPacer, origin_of
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.fetch.results import FetchResult
from crawl_platform.fetch.robots import RobotsCache, fetch_robots_txt
from crawl_platform.fetch.transport import Transport
from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.html import DEFAULT_ENGINE, ParsedPage, ParserEngine
from crawl_platform.parse.pool import Page, parse_pages
from crawl_platform.pipeline.control_watch import ControlWatch, CrawlStates
from crawl_platform.render import find_browser, rendering_problem
from crawl_platform.render.decision import RenderDecision, decide
from crawl_platform.render.results import PageRendering, RenderContext, Rendered, RenderJob, ShardRendering
from crawl_platform.storage import Folder
from crawl_platform.store.hosts import HostRecord

if TYPE_CHECKING:
    from crawl_platform.extract.engine import Extractor
    from crawl_platform.pipeline.shard import ShardResult
    from crawl_platform.render.browsers import BrowserPool


class ShardRenderer:
    """Renders the pages of one fetched shard that need it (see the module docstring). The browser
    pool starts at the first page to render and serves every later shard until :meth:`close`."""

    def __init__(self, guard: NetworkGuard, *, allowed: bool = True, browser_path: str = "",
                 browsers: int = 2, pages_per_browser: int = 50, timeout_s: float = 20.0,
                 max_memory_mb: int = 1024, host_delay_s: float = 0.25, min_host_delay_s: float = 0.0,
                 connect_timeout_s: float = 5.0, archive: Folder | None = None, parser: ParserEngine = DEFAULT_ENGINE,
                 main_content: bool = True, max_links: int = MAX_LINKS_PER_PAGE, ca_file: str = "",
                 obey_robots: bool = True, user_agent: str = "", proxies: ProxyPool | None = None,
                 crawl_states: CrawlStates | None = None) -> None:
        self.guard = guard
        # Reads the crawls' states from the lake (ControlWatch); None: the plan step's states hold.
        self.crawl_states = crawl_states
        self.ca_file = ca_file  # CRAWL_TLS_CA_FILE: the browsers trust its CAs, as the fetcher does
        self.obey_robots = obey_robots  # CRAWL_OBEY_ROBOTS: for every request of a rendered page too
        # Sent for robots.txt files, as the fetcher does: CRAWL_USER_AGENT.
        self.user_agent = user_agent or str(FetchSettings.model_fields["user_agent"].default)
        self.allowed = allowed  # CRAWL_RENDER_ALLOWED
        self.browser_path = browser_path
        self.browsers = browsers
        self.pages_per_browser = pages_per_browser
        self.timeout_s = timeout_s
        self.max_memory_mb = max_memory_mb
        self.host_delay_s = host_delay_s  # the platform's gap per host, and the floor of a crawl's own
        self.min_host_delay_s = min_host_delay_s
        self.connect_timeout_s = connect_timeout_s
        self.archive = archive
        self.parser = parser
        self.main_content = main_content
        self.max_links = max_links
        self.proxies = proxies  # CRAWL_PROXIES: the browsers' requests leave through them
        self._pool: BrowserPool | None = None
        self._extractors: dict[str, Extractor | None] = {}

    @classmethod
    def from_settings(cls, settings: Settings, archive: Folder | None = None,
                      crawl_states: CrawlStates | None = None) -> ShardRenderer:
        return cls(NetworkGuard(settings.allowed_networks), allowed=settings.render_allowed,
                   browser_path=settings.browser_path, browsers=settings.render_browsers,
                   pages_per_browser=settings.render_pages_per_browser, timeout_s=settings.render_timeout_s,
                   max_memory_mb=settings.render_max_memory_mb, host_delay_s=settings.host_delay_ms / 1000.0,
                   min_host_delay_s=settings.min_host_delay_ms / 1000.0,
                   connect_timeout_s=settings.connect_timeout_s, archive=archive, parser=settings.parser,
                   main_content=settings.main_content, max_links=settings.max_links_per_page,
                   ca_file=settings.tls_ca_file, obey_robots=settings.obey_robots, user_agent=settings.user_agent,
                   proxies=(ProxyPool.from_settings_list(settings.proxies, settings.secrets())
                            if settings.proxies else None), crawl_states=crawl_states)

    def render(self, shard: ShardResult, batch_id: str = "", name: str = "s0") -> ShardResult:
        """The shard with its pages that need it rendered (untouched when none of its crawls render)."""
        rendered = self.render_pages(shard, batch_id, name)
        return shard if rendered is None else shard.with_rendering(rendered)

    def render_pages(self, shard: ShardResult, batch_id: str = "", name: str = "s0") -> ShardRendering | None:
        """What rendering the shard's pages gives (None when none of its crawls render): what a
        render step hands landing, which applies it to the fetch step's shard."""
        context = shard.render
        if context is None or not context.terms:
            return None
        clock = time.perf_counter()
        decisions = self._decide(shard, context)
        wanted = [url for url, d in decisions.items() if d.render]
        problem = None if self.allowed else "rendering is off on this platform (CRAWL_RENDER_ALLOWED=false)"
        problem = problem or (rendering_problem(self.browser_path, self.ca_file) if wanted else None)
        outcomes: dict[str, Rendered] = {}
        # Read at the first page: the fetch step, however long, came between the plan step's read and this.
        watch = ControlWatch.of(self.crawl_states, {c for url in wanted for c in context.terms[url].crawl_ids},
                                read_first=True)
        if wanted and problem is None:
            hold = (lambda job: watch.holds_url(job.url, context.terms[job.url].crawl_ids)) if watch else None
            outcomes = self._pool_for().render_all(self._jobs(shard, context, wanted), hold)
        held = set(watch.passed_over) if watch is not None else set()
        rendering: dict[str, PageRendering] = {}
        doms: dict[str, Rendered] = {}
        for url, decision in decisions.items():
            outcome = outcomes.get(url)
            if url in held:
                continue
            if not decision.render:
                rendering[url] = PageRendering(False, decision.reason)
            elif outcome is None or outcome.html is None:
                rendering[url] = PageRendering(False, decision.reason, problem or (outcome.error if outcome else None),
                                               outcome.refused if outcome else ())
            else:
                doms[url] = outcome
        parsed: dict[str, ParsedPage] = {}
        if doms:
            pages: list[Page] = [(url, d.html.encode(), shard.results[url].final_url, "text/html; charset=utf-8")
                                 for url, d in doms.items() if d.html is not None]
            parsed.update(parse_pages(pages, self.parser, self.main_content, self.max_links))
        pointers = self._archive(shard, doms, batch_id, name)
        for url, outcome in doms.items():
            rendering[url] = PageRendering(True, decisions[url].reason, None, outcome.refused, pointers.get(url))
        marked = {origin_of(url) for url, d in decisions.items() if d.marks_host and url in doms}
        return ShardRendering(parsed, rendering, marked, time.perf_counter() - clock, sorted(held))

    def pids(self) -> list[int]:
        """The browsers' process ids (none before the first page to render)."""
        return self._pool.pids() if self._pool is not None else []

    def close(self) -> None:
        """Ends the browsers and their proxies."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _decide(self, shard: ShardResult, context: RenderContext) -> dict[str, RenderDecision]:
        """The decision on each HTML page of the shard that its crawl would render, host by host in
        fetch order, so a page that needs rendering marks its host for the host's later pages."""
        decisions: dict[str, RenderDecision] = {}
        needing = set(context.hosts_needing)
        for url, terms in context.terms.items():
            result = shard.results.get(url)
            if result is None or not result.is_html or url in shard.unchanged or result.error is not None:
                continue
            origin = origin_of(url)
            decision = decide(terms.mode, result, shard.parsed.get(url), self._extractor(terms.extract_rules),
                              origin in needing)
            if decision.marks_host:
                needing.add(origin)
            decisions[url] = decision
        return decisions

    def _extractor(self, rules: str) -> Extractor | None:
        if not rules:
            return None
        if rules not in self._extractors:
            from crawl_platform.extract.engine import Extractor  # noqa: PLC0415 - only auto crawls with rules
            from crawl_platform.extract.rules import rules_from_json  # noqa: PLC0415

            self._extractors[rules] = Extractor(rules_from_json(rules))
        return self._extractors[rules]

    def _jobs(self, shard: ShardResult, context: RenderContext, urls: list[str]) -> list[RenderJob]:
        pool = self._pool_for()
        # The gate counts each host's gap from the fetch step's last request to it.
        last: dict[str, datetime] = {}
        for result in shard.results.values():
            end = result.fetched_at + timedelta(milliseconds=result.elapsed_ms)
            origin = origin_of(result.final_url)
            last[origin] = max(end, last.get(origin, end))
        now_wall, now_mono = datetime.now(UTC).replace(tzinfo=None), time.monotonic()
        delays = {record.origin: record.delay_ms / 1000.0 for record in shard.hosts if record.delay_ms}

        def prime() -> None:
            for url in urls:
                origin = origin_of(shard.results[url].final_url)
                own = context.terms[url].host_delay_s
                delay = max(self.min_host_delay_s, own) if own is not None else self.host_delay_s
                ended = last.get(origin)
                pool.gate.prime(origin, max(delay, delays.get(origin, 0.0)),
                                now_mono - (now_wall - ended).total_seconds() if ended is not None else None)

        pool.call(prime)
        if pool.robots is not None:  # the robots.txt the fetch step read, in place of a second fetch
            read_at = datetime.now(UTC).replace(tzinfo=None)
            for origin, body in context.robots.items():
                pool.robots.cache.prime(HostRecord(origin, 200, body, read_at))
        jobs = []
        for url in urls:
            result, terms = shard.results[url], context.terms[url]
            jobs.append(RenderJob(url, result.final_url, result.status or 200, _headers(result), result.body,
                                  terms.user_agent, terms.screenshots))
        return _interleaved(jobs)

    def _pool_for(self) -> BrowserPool:
        if self._pool is None:
            from crawl_platform.render.browsers import BrowserPool  # noqa: PLC0415 - imports Playwright
            from crawl_platform.render.page_requests import HostGate  # noqa: PLC0415

            executable = find_browser(self.browser_path)
            if executable is None:  # rendering_problem said so before any caller gets here
                raise RuntimeError(rendering_problem(self.browser_path, self.ca_file) or "no browser")
            self._pool = BrowserPool(executable, self.guard, HostGate(self.host_delay_s), browsers=self.browsers,
                                     pages_per_browser=self.pages_per_browser, timeout_s=self.timeout_s,
                                     max_memory_mb=self.max_memory_mb, connect_timeout_s=self.connect_timeout_s,
                                     ca_file=self.ca_file, robots=self._robots() if self.obey_robots else None,
                                     proxies=self.proxies)
        return self._pool

    def _robots(self) -> RobotsCache:
        """The fetcher's robots.txt cache, fetching through a transport of its own (the network
        guard, the crawl's proxies, the CAs of CRAWL_TLS_CA_FILE); the browsers' gate paces each
        fetch, so its own pacer has no gap."""
        transport = Transport(self.guard, self.connect_timeout_s, proxies=self.proxies, ca_file=self.ca_file)
        pacer = HostPacer(0.0)
        return RobotsCache(lambda url: fetch_robots_txt(transport, pacer, url, self.user_agent))

    def _archive(self, shard: ShardResult, doms: dict[str, Rendered], batch_id: str, name: str,
                 ) -> dict[str, RecordPointer]:
        """The rendered DOMs (and screenshots) in one new WARC file: each DOM record's pointer."""
        if self.archive is None or not doms:
            return {}
        warc = WarcFile(self.archive, shard_file_name(batch_id, f"{name}-render"),
                        {"isPartOf": batch_id or "batch", "shard": name, "description": "rendered DOMs"})
        pointers = {}
        try:
            for url, outcome in doms.items():
                if outcome.html is None:
                    continue
                result = shard.results[url]
                pointers[url] = warc.add_rendering(result.final_url, outcome.html.encode(), result.fetched_at,
                                                   shard.archived.get(url), outcome.screenshot)
            warc.commit()
        except BaseException:
            warc.discard()
            raise
        return pointers


def _headers(result: FetchResult) -> tuple[tuple[str, str], ...]:
    """The response headers the browser is answered with: the archived ones, else the content type."""
    if result.exchange is not None:
        return result.exchange.response_headers
    return (("Content-Type", result.content_type or "text/html"),)


def _interleaved(jobs: list[RenderJob]) -> list[RenderJob]:
    """Jobs in turns over their hosts, so the browsers render different hosts side by side while
    each host's gap runs."""
    by_host: dict[str, list[RenderJob]] = {}
    for job in jobs:
        by_host.setdefault(origin_of(job.final_url), []).append(job)
    queues = list(by_host.values())
    out: list[RenderJob] = []
    while queues:
        out += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return out

