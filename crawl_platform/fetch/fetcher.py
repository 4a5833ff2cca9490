"""Fetches a batch of URLs politely: hosts in parallel, each at its own pace, every hop checked.

Input is a batch's :class:`FetchRequest` list (a URL plus, from its crawl, the User-Agent, the
scope and the validators of the page's latest version); output is one :class:`FetchResult` per
URL, never an exception: failures become results with ``error`` set, so they land as rows. Per
URL the fetcher follows redirects by hand (each hop checked against the crawl's scope, robots.txt
and the network guard; loops detected; the chain recorded), retries connection failures, 429 and
5xx with backoff (:mod:`crawl_platform.fetch.retry`), spaces requests per host adaptively
(:mod:`crawl_platform.fetch.politeness`) and sends conditional requests on a recrawl. The bounded HTTP
exchange itself is :mod:`crawl_platform.fetch.transport`; robots.txt is :mod:`crawl_platform.fetch.robots`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

from crawl_platform.config import Settings
from crawl_platform.fetch.netguard import BlockedAddressError, NetworkGuard
from crawl_platform.fetch.politeness import HostPacer, origin_of
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.fetch.results import HTML_TYPES, FetchRequest, FetchResult, RedirectHop
from crawl_platform.fetch.retry import RetryPolicy, parse_retry_after
from crawl_platform.fetch.robots import RobotsCache, fetch_robots_txt
from crawl_platform.fetch.transport import (
    REDIRECT_STATUSES,
    ConnectionFailedError,
    Response,
    Transport,
    TransportError,
)
from crawl_platform.fetch.turns import HostTurns
from crawl_platform.malloc import limit_arenas
from crawl_platform.redaction import redact_passwords as redact
from crawl_platform.store.hosts import HostRecord
from crawl_platform.urls import InvalidURLError, canonicalize

# The request and result types live in results.py; callers import them from here.
__all__ = ["HTML_TYPES", "MAX_CRAWL_DELAY_S", "FetchRequest", "FetchResult", "Fetcher", "RedirectHop"]

MAX_CRAWL_DELAY_S = 10.0
_ROBOTS_UNREACHABLE = "robots.txt unreachable (server error or network failure): host skipped until it answers"
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"


@dataclass
class _Trail:
    """Where a fetch has got to: the URL being requested and the redirects before it."""

    current: str
    chain: list[str] = field(default_factory=list)
    hops: list[RedirectHop] = field(default_factory=list)


class _ByteBudget:
    """The bytes of bodies one :meth:`Fetcher.fetch_all` may read (None: no limit); thread-safe."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.read = 0
        self._lock = threading.Lock()

    @property
    def spent(self) -> bool:
        return self.limit is not None and self.read >= self.limit

    def add(self, count: int) -> None:
        with self._lock:
            self.read += count


class _NoResponseError(Exception):
    """No response worth keeping for this hop; ``str`` is the error, ``attempts`` the requests sent."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class Fetcher:
    """HTTP client of the crawl; thread-safe. One instance per run: it holds the run's host state
    (robots.txt, gaps), a pool of worker threads and the transport's keep-alive connections,
    which serve every batch."""

    def __init__(
        self,
        user_agent: str,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 15.0,
        max_body_bytes: int = 10 * 1024 * 1024,
        max_redirects: int = 5,
        host_delay_s: float = 0.25,
        concurrency: int = 16,
        obey_robots: bool = True,
        allowed_networks: Sequence[str] = (),
        deadline_s: float = 30.0,
        content_types: Iterable[str] = HTML_TYPES,
        retry: RetryPolicy | None = None,
        max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
        max_host_delay_s: float = 30.0,
        slow_response_s: float = 2.0,
        proxies: Sequence[str] = (),
        robots_error_ttl_s: float = 300.0,
        host_concurrency: int = 1,
        min_host_delay_s: float = 0.0,
        max_host_concurrency: int = 64,
        ca_file: str = "",
    ) -> None:
        self.user_agent = user_agent
        self.max_redirects = max_redirects
        self.concurrency = concurrency
        self.obey_robots = obey_robots
        self.content_types = frozenset(t.lower() for t in content_types)
        self.retry = retry or RetryPolicy()
        self.max_crawl_delay_s = max_crawl_delay_s
        self.host_concurrency = max(1, host_concurrency)
        self.min_host_delay_s = min_host_delay_s  # floor of a crawl's own delay (CRAWL_MIN_HOST_DELAY_MS)
        self.max_host_concurrency = max(1, max_host_concurrency)  # cap (CRAWL_MAX_REQUESTS_PER_HOST)
        # A host's requests in flight, plus its robots.txt and a redirect from another host.
        self.transport = Transport(NetworkGuard(allowed_networks), connect_timeout_s, read_timeout_s,
                                   deadline_s, max_body_bytes, ProxyPool(proxies),
                                   connections_per_host=max(4, max(self.host_concurrency,
                                                                   min(self.max_host_concurrency, 64)) + 2),
                                   ca_file=ca_file)
        self.pacer = HostPacer(host_delay_s, max_delay_s=max_host_delay_s, slow_response_s=slow_response_s,
                               concurrency=self.host_concurrency)
        self.robots = RobotsCache(
            lambda url: fetch_robots_txt(self.transport, self.pacer, url, self.user_agent),
            error_ttl_s=robots_error_ttl_s,
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Fetcher:
        retry = RetryPolicy(max_attempts=settings.fetch_max_attempts, backoff_s=settings.retry_backoff_s,
                            max_total_wait_s=settings.retry_max_wait_s)
        return cls(
            user_agent=settings.user_agent,
            connect_timeout_s=settings.connect_timeout_s,
            read_timeout_s=settings.read_timeout_s,
            max_body_bytes=settings.max_body_bytes,
            max_redirects=settings.max_redirects,
            host_delay_s=settings.host_delay_ms / 1000.0,
            concurrency=settings.fetch_concurrency,
            host_concurrency=settings.host_concurrency,
            min_host_delay_s=settings.min_host_delay_ms / 1000.0,
            max_host_concurrency=settings.max_requests_per_host,
            obey_robots=settings.obey_robots,
            allowed_networks=list(settings.allowed_networks),
            deadline_s=settings.fetch_deadline_s,
            content_types=settings.content_types,
            retry=retry,
            max_crawl_delay_s=settings.max_crawl_delay_s,
            max_host_delay_s=settings.max_host_delay_ms / 1000.0,
            slow_response_s=settings.slow_response_ms / 1000.0,
            proxies=(ProxyPool.from_settings_list(settings.proxies, settings.secrets()).proxies
                     if settings.proxies else ()),
            ca_file=settings.tls_ca_file,
        )

    # --- host state shared across runs -----------------------------------------------------------
    def prime(self, records: Iterable[HostRecord]) -> None:
        """Start from what earlier runs learned (``hosts`` rows): robots.txt, the host's gap and
        when it was last contacted."""
        for record in records:
            self.robots.prime(record)
            self.pacer.load(record.origin, record.delay_ms, record.updated_at)

    def host_records(self, origins: Iterable[str] | None = None) -> list[HostRecord]:
        """What this fetcher learned (about ``origins``, default all), as ``hosts`` rows to write
        back with the batch."""
        robots = {r.origin: r for r in self.robots.fetched_records()}
        delays = self.pacer.learned()
        known = robots.keys() | delays.keys()
        return [
            HostRecord(o, *(robots[o].robots_status, robots[o].robots_body, robots[o].robots_fetched_at)
                       if o in robots else (None, None, None), delay_ms=delays.get(o))
            for o in sorted(known if origins is None else known & set(origins))
        ]

    # --- fetching -------------------------------------------------------------------------------
    def fetch_all(self, requests: Iterable[str | FetchRequest],
                  on_result: Callable[[FetchResult], None] | None = None,
                  max_bytes: int | None = None,
                  hold: Callable[[FetchRequest], bool] | None = None) -> dict[str, FetchResult]:
        """Fetch every URL once (the first request for a URL wins); returns results keyed by URL.
        ``on_result`` is called with each result as it completes, from the worker thread that
        fetched it (the fetch step hands pages to its parse workers this way); it must not raise.
        One URL's failure is its result's ``error``: it never costs another URL its result. With
        ``max_bytes``, no request starts once the bodies read add up to it (those in flight finish):
        the URLs left have no result, and the caller fetches them later. ``hold`` is asked before
        each request starts (from the worker threads): a request it holds is not sent and has no
        result either, and costs its host no turn (a paused crawl's URLs are passed over at once)."""
        unique: dict[str, FetchRequest] = {}
        for req in requests:
            request = FetchRequest(req) if isinstance(req, str) else req
            unique.setdefault(request.url, request)
        # Grouped by origin (scheme, host and port), the unit the pacer spaces requests by.
        by_host: dict[str, list[FetchRequest]] = defaultdict(list)
        for request in unique.values():
            by_host[origin_of(request.url)].append(request)
        # One queue per request a host may have in flight (CRAWL_HOST_CONCURRENCY, or its crawls'
        # own); the workers take the queue whose host's turn comes first, and the pacer spaces them.
        queues = []
        for origin, host_requests in by_host.items():
            concurrency = self._host_policy(origin, host_requests)
            queues += [(origin, host_requests[i::concurrency]) for i in range(min(concurrency, len(host_requests)))]
        turns = HostTurns(self.pacer, queues)
        budget = _ByteBudget(max_bytes)
        pool = self._workers()
        workers = [pool.submit(self._serve_turns, turns, on_result, budget, hold)
                   for _ in range(min(self.concurrency, len(unique)))]
        return {result.url: result for worker in workers for result in worker.result()}

    def close(self) -> None:
        """Stop the worker threads and close the keep-alive connections."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.transport.close()

    def fetch(self, request: str | FetchRequest) -> FetchResult:
        """Fetch one URL, following redirects; never raises: whatever goes wrong is the result's ``error``."""
        req = FetchRequest(request) if isinstance(request, str) else request
        started = time.monotonic()
        trail = _Trail(req.url)
        try:
            outcome = self._follow(req, trail)
        except BlockedAddressError as err:
            outcome = {"error": f"blocked address: {err}"}
        except InvalidURLError as err:
            outcome = {"error": f"bad redirect: {redact(str(err))}"}
        except _NoResponseError as err:
            outcome = {"error": str(err), "attempts": err.attempts}
        except TransportError as err:
            outcome = {"error": str(err)}
        except Exception as err:  # anything else is this URL's failure: it lands as a row, never stops the batch
            outcome = {"error": f"fetch failed: {type(err).__name__}: {redact(' '.join(str(err).split()))[:300]}"}
        return FetchResult(
            url=req.url, final_url=trail.current, fetched_at=datetime.now(UTC).replace(tzinfo=None),
            elapsed_ms=(time.monotonic() - started) * 1000.0, redirect_chain=tuple(trail.chain), hops=tuple(trail.hops),
            **{"status": None, "content_type": None, "body": b"", "error": None} | outcome,
        )

    def _follow(self, req: FetchRequest, trail: _Trail) -> dict[str, Any]:
        """Request ``req.url`` and its redirects; the fields of the result (``trail`` tracks the hops)."""
        agent = req.user_agent or self.user_agent
        for hop in range(self.max_redirects + 1):
            if hop and req.in_scope is not None and not req.in_scope(trail.current):
                return {"error": f"redirect leaves the crawl's scope: {redact(trail.current)}"}
            if self.obey_robots:
                policy = self.robots.policy(origin_of(trail.current))
                if policy.disallow_all:  # RFC 9309: unreachable means disallow, but it is the host's failure
                    return {"error": _ROBOTS_UNREACHABLE}
                if not policy.allows(trail.current, agent):
                    return {"disallowed": True, "error": "disallowed by robots.txt"}
            headers = {"User-Agent": agent, "Accept": _ACCEPT}
            if hop == 0 and req.etag:
                headers["If-None-Match"] = req.etag
            if hop == 0 and req.last_modified:
                headers["If-Modified-Since"] = req.last_modified
            resp, attempts, gave_up = self._exchange(trail.current, headers, req.accept_any, agent)
            location = resp.headers.get("Location")
            if resp.status in REDIRECT_STATUSES and location and gave_up is None:
                trail.hops.append(RedirectHop(trail.current, resp.status, resp.body, resp.exchange,
                                              datetime.now(UTC).replace(tzinfo=None)))
                trail.chain.append(trail.current)
                trail.current = canonicalize(urljoin(trail.current, location))
                if trail.current in trail.chain:
                    return {"error": f"redirect loop: {' -> '.join([*trail.chain, trail.current])}"}
                continue
            keep_body = resp.status not in REDIRECT_STATUSES and resp.status != 304
            return {"status": resp.status, "content_type": resp.content_type, "error": gave_up,
                    "body": resp.body if keep_body else b"", "etag": resp.headers.get("ETag"),
                    "last_modified": resp.headers.get("Last-Modified"), "attempts": attempts,
                    "exchange": resp.exchange}
        return {"error": f"more than {self.max_redirects} redirects"}

    # --- internals ------------------------------------------------------------------------------
    def _host_policy(self, origin: str, requests: Sequence[FetchRequest]) -> int:
        """Set ``origin``'s base gap and concurrency from its requests' crawls and return the
        concurrency. A crawl's own delay is raised to the floor and its concurrency cut to the cap
        (the operator's limits); a host shared by crawls takes the most polite of them (the longest
        gap, the fewest requests in flight). robots.txt Crawl-delay and adaptive back-off stay on
        top, in the pacer."""
        delays = {self.pacer.base_delay_s if r.host_delay_s is None else max(self.min_host_delay_s, r.host_delay_s)
                  for r in requests}
        concurrency = min(self.host_concurrency if not r.host_concurrency
                          else min(self.max_host_concurrency, r.host_concurrency) for r in requests)
        self.pacer.set_policy(origin, max(delays), concurrency)
        return concurrency

    def _workers(self) -> ThreadPoolExecutor:
        """One pool of worker threads for the fetcher's life, sharing the process's few malloc arenas."""
        with self._pool_lock:
            if self._pool is None:
                limit_arenas()
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="fetch")
            return self._pool

    def _serve_turns(self, turns: HostTurns[FetchRequest], on_result: Callable[[FetchResult], None] | None,
                     budget: _ByteBudget, hold: Callable[[FetchRequest], bool] | None) -> list[FetchResult]:
        results, previous = [], None
        while not budget.spent and (turn := turns.take(previous)) is not None:
            previous, request = turn
            if budget.spent:  # spent while this worker waited for the host's turn
                break
            if hold is not None and hold(request):
                continue  # no request sent, so the host's next turn comes as soon as it would have
            if self._robots_first(request.url):
                turns.put_back(previous, request)  # the page waits out the host's gap in its queue
                continue
            result = self.fetch(request)
            budget.add(len(result.body))
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results

    def _robots_first(self, url: str) -> bool:
        """Fetch the robots.txt of ``url``'s host as a turn of its own when it is not known yet;
        True when it did. The page then waits out the host's gap without holding the worker: a
        batch of new hosts (a broad crawl's seeds) takes one gap, not hosts x gap / workers."""
        if not self.obey_robots:
            return False
        origin = origin_of(url)
        if self.robots.known(origin):
            return False
        try:
            self.robots.policy(origin)
        except Exception:  # the page's own fetch asks again and reports it
            return False
        return True

    def _accepts(self, accept_any: bool) -> Callable[[str | None], bool]:
        if accept_any:
            return lambda _media: True
        return lambda media: media is None or media in self.content_types

    def _exchange(self, url: str, headers: dict[str, str], accept_any: bool,
                  agent: str) -> tuple[Response, int, str | None]:
        """One hop with retries: (response, requests sent, why we stopped retrying or None).

        Raises :class:`_NoResponseError` when no response came back at all.
        """
        origin = origin_of(url)
        attempts, waited = 0, 0.0
        while True:
            if self.pacer.unreachable(origin):
                limit = self.pacer.failure_limit
                raise _NoResponseError(f"host unreachable: {limit} connection failures in a row", attempts)
            attempts += 1
            try:
                with self.pacer.turn(origin, self._crawl_delay(origin, agent)):
                    resp = self.transport.get(url, headers, accepts=self._accepts(accept_any))
            except ConnectionFailedError as err:
                self.pacer.observe(origin, None, None)
                wait = self.retry.wait_before(attempts, waited)
                if isinstance(wait, str):
                    raise _NoResponseError(f"{err} ({wait})", attempts) from None
                time.sleep(wait)
                waited += wait
                continue
            self.pacer.observe(origin, resp.latency_s, resp.status)
            if not self.retry.should_retry_status(resp.status):
                return resp, attempts, None
            wait = self.retry.wait_before(attempts, waited, parse_retry_after(resp.headers.get("Retry-After")))
            if isinstance(wait, str):
                return resp, attempts, f"HTTP {resp.status}: {wait}"
            time.sleep(wait)
            waited += wait

    def _crawl_delay(self, origin: str, agent: str) -> float:
        if not self.obey_robots:
            return 0.0
        delay = self.robots.policy(origin).crawl_delay(agent)
        return min(delay, self.max_crawl_delay_s) if delay is not None else 0.0
