"""robots.txt and per-host politeness for each request a rendered page makes, whatever its scheme.

The guard proxy (:mod:`.guard_proxy`) sees an HTTPS request only as a tunnel, so the rules that
need a request's URL live here, on the browser's side of TLS: :class:`PageRequests` is a
Playwright route for every request of a page's browser context (its sub-resources, ``fetch()``
and XHR calls, its frames), and for each one

- asks :class:`PageRobots` whether the robots.txt of the request's host lets the crawl's
  User-Agent fetch it; a URL it disallows is aborted before anything leaves the browser, and
  recorded as ``URL: disallowed by robots.txt``;
- waits for its host's turn on the crawl's :class:`HostGate`, lets the request go, and holds the
  turn until the request has ended (its response read, or its failure), so a host's requests go one
  at a time, each starting at least the host's gap after the previous one ended. The end is what
  the page's renderer reports, and a renderer whose main thread never returns (a script that loops)
  reports none: a request holds the turn for at most :data:`LONGEST_HOLD_S`, so one hung page
  does not stall its host for the pages rendering beside it.

Playwright hands a route the first request of a redirect chain only: the browser follows the
redirect itself, within the turn of the request it answers. The navigation to the page is
answered from its archived response by a page route, which runs before this one, so it is not
paced twice (the fetch step paced it). One :class:`PageRequests` serves one page; the gate and
:class:`PageRobots` are shared by every browser of a render step. asyncio only, in the render loop
(:mod:`.browsers`).

:class:`PageRobots` is the fetcher's :class:`~crawl_platform.fetch.robots.RobotsCache` (the same
RFC 9309 reading, expiry and error rules), primed with the robots.txt the fetch step read for the
pages' own hosts; another host's robots.txt is fetched the first time a page asks that host for
something, in that host's turn and through the network guard, like the fetcher's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from crawl_platform.fetch.netguard import BlockedAddressError
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.fetch.robots import RobotsCache

_ROUTED_SCHEMES = ("http://", "https://")
LONGEST_HOLD_S = 3.0  # a request whose end is not reported by then lets its host's next one go


class HostGate:
    """Per-origin gaps for a browser pool's requests (asyncio; one per render loop)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s  # the gap of an origin no crawl set one for
        self._delays: dict[str, float] = {}
        self._last_end: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.requests: dict[str, int] = {}  # requests let through, by origin

    def prime(self, origin: str, delay_s: float, last_contact: float | None = None) -> None:
        """Give ``origin`` its gap (the longest one asked for wins) and, as a ``time.monotonic()``,
        when another step last finished a request to it, so the first request here keeps the gap."""
        self._delays[origin] = max(delay_s, self._delays.get(origin, 0.0))
        if last_contact is not None:
            self._last_end[origin] = max(last_contact, self._last_end.get(origin, float("-inf")))

    @contextlib.asynccontextmanager
    async def turn(self, origin: str, abandoned: asyncio.Event | None = None) -> AsyncIterator[bool]:
        """One request to ``origin``: waits until the gap after the previous one's end has passed,
        and yields True; the next waits for this one to end. Once ``abandoned`` is set (its page
        closed) the wait stops and it yields False: the request does not go, and takes no gap."""
        lock = self._locks.setdefault(origin, asyncio.Lock())
        async with lock:
            wait = self._last_end.get(origin, float("-inf")) + self._delays.get(origin, self.delay_s) - time.monotonic()
            if wait > 0 and abandoned is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(abandoned.wait(), wait)
            elif wait > 0:
                await asyncio.sleep(wait)
            if abandoned is not None and abandoned.is_set():
                yield False
                return
            self.requests[origin] = self.requests.get(origin, 0) + 1
            try:
                yield True
            finally:
                self._last_end[origin] = time.monotonic()


class PageRobots:
    """robots.txt of every host the rendered pages ask for, from the fetcher's cache (thread-safe,
    so a fetch runs on a worker thread while the render loop goes on)."""

    def __init__(self, cache: RobotsCache, gate: HostGate) -> None:
        self.cache = cache
        self.gate = gate
        self._fetching: dict[str, asyncio.Lock] = {}  # one fetch per host, the others wait for it

    async def allows(self, url: str, user_agent: str) -> bool | None:
        """Whether the host's robots.txt lets ``user_agent`` fetch ``url``, fetching it first when
        the cache has none; None when the network guard refuses the host (the guard proxy then
        refuses the request itself, with the guard's reason)."""
        origin = origin_of(url)
        try:
            if not self.cache.known(origin):
                async with self._fetching.setdefault(origin, asyncio.Lock()):
                    if not self.cache.known(origin):
                        async with self.gate.turn(origin):
                            await asyncio.to_thread(self.cache.policy, origin)
            return self.cache.policy(origin).allows(url, user_agent)
        except BlockedAddressError:
            return None

    def known_allows(self, user_agent: str) -> Callable[[str], bool]:
        """A check that needs no fetch: a URL of a host whose robots.txt the cache holds, against
        it; any other URL passes (for the proxy, which sees only plain-HTTP redirect hops)."""
        def allows(url: str) -> bool:
            origin = origin_of(url)
            return not self.cache.known(origin) or self.cache.policy(origin).allows(url, user_agent)
        return allows


class PageRequests:
    """The route of one page's browser context: robots.txt, then the host's turn, per request.

    Register it with :meth:`attach`; ``refused`` lists the requests robots.txt refused, and
    :meth:`release` (when the page is done) lets go of the turns of requests still in flight."""

    def __init__(self, gate: HostGate, robots: PageRobots | None, user_agent: str) -> None:
        """``robots`` None: the crawl does not obey robots.txt (``CRAWL_OBEY_ROBOTS=false``)."""
        self.gate = gate
        self.robots = robots
        self.user_agent = user_agent
        self.refused: list[str] = []
        self._closed = asyncio.Event()
        self._ends: dict[Any, asyncio.Future[None]] = {}  # Playwright Request -> its end

    async def attach(self, context: Any) -> None:
        context.on("requestfinished", self._ended)
        context.on("requestfailed", self._ended)
        await context.route("**/*", self._route)

    def release(self) -> None:
        """End every turn held or awaited: the page is closed, its requests will never report."""
        self._closed.set()
        for ended in self._ends.values():
            if not ended.done():
                ended.set_result(None)
        self._ends.clear()

    async def _route(self, route: Any) -> None:
        request = route.request
        url: str = request.url
        if not url.startswith(_ROUTED_SCHEMES):
            with contextlib.suppress(Exception):
                await route.continue_()
            return
        if self.robots is not None:
            try:
                allowed = await self.robots.allows(url, self.user_agent)
            except Exception as err:  # a route left unanswered would hang the request: refuse it
                message = " ".join(str(err).split())[:300]
                allowed, reason = False, f"robots.txt not read ({type(err).__name__}: {message})"
            else:
                reason = "disallowed by robots.txt"
            if allowed is False:
                self.refused.append(f"{url}: {reason}")
                with contextlib.suppress(Exception):  # the page may be closing
                    await route.abort("blockedbyclient")
                return
        ended = asyncio.get_running_loop().create_future()
        self._ends[request] = ended
        async with self.gate.turn(origin_of(url), self._closed) as granted:
            if not granted:
                self._ends.pop(request, None)
                return
            try:
                await route.continue_()
            except Exception:  # the page closed under it: the request never left
                self._ends.pop(request, None)
                return
            await asyncio.wait((ended,), timeout=LONGEST_HOLD_S)

    def _ended(self, request: Any) -> None:
        ended = self._ends.pop(request, None)
        if ended is not None and not ended.done():
            ended.set_result(None)
