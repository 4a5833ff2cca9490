"""Per-host politeness that adapts to how the host is doing, and the ``hosts`` table that keeps it.

A host is an origin, ``scheme://host[:port]``. Inside a run the fetcher's workers serve hosts
in the order :meth:`HostPacer.ready_at` gives (:mod:`crawl_platform.fetch.turns`), one request at
a time per host, and :class:`HostPacer` spaces a host's requests: at least the configured gap (or
the crawls' own gap, :meth:`HostPacer.set_policy`, or the robots.txt Crawl-delay, capped, whichever
is longest), and more when the host struggles. The gap doubles on a
``429``/``503``, becomes twice the response latency when the host answers slowly, and decays
back towards the configured gap while it answers fast. After
``failure_limit`` connection failures in a row the host counts as unreachable for the rest of
the run, so a dead host costs one timeout per attempt, not one per URL.

Across runs the ``hosts`` table carries the learned gap and the robots.txt cache: a batch reads
its hosts' rows once before fetching and writes them back in its landing transaction
(:mod:`crawl_platform.store.hosts`, whose rows are
:class:`~crawl_platform.store.hosts.HostRecord`). Nothing here touches the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

THROTTLE_STATUSES = frozenset({429, 503})


def origin_of(url: str) -> str:
    """``http://Example.com:8080/a?b`` -> ``http://example.com:8080``: the key of the ``hosts`` table."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass
class _HostState:
    delay_s: float
    base_s: float  # the gap the host decays back to: the pacer's, or its crawls' own (set_policy)
    concurrency: int  # requests in flight while the host is healthy
    last_start: float = float("-inf")  # time.monotonic() of the latest request (or reserved slot)
    last_end: float = float("-inf")  # when the latest response (or failure) was over
    connection_failures: int = 0
    floor_s: float = 0.0  # the Crawl-delay the latest request was given
    touched: bool = False
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)


class HostPacer:
    """Adaptive per-host gaps; thread-safe. All times in seconds."""

    def __init__(self, base_delay_s: float = 0.25, max_delay_s: float = 30.0, slow_response_s: float = 2.0,
                 throttle_delay_s: float = 1.0, decay: float = 0.75, failure_limit: int = 5,
                 concurrency: int = 1) -> None:
        self.base_delay_s = base_delay_s
        self.concurrency = concurrency  # requests a healthy host may have in flight
        self.max_delay_s = max(max_delay_s, base_delay_s)
        self.slow_response_s = slow_response_s
        self.throttle_delay_s = throttle_delay_s  # the first step up from a zero/small gap
        self.decay = decay
        self.failure_limit = failure_limit
        self._hosts: dict[str, _HostState] = {}
        self._lock = threading.Lock()

    def _state(self, origin: str) -> _HostState:
        with self._lock:
            state = self._hosts.get(origin)
            if state is None:
                state = self._hosts[origin] = _HostState(self.base_delay_s, self.base_delay_s, self.concurrency)
            return state

    def load(self, origin: str, delay_ms: int | None, last_contact: datetime | None = None) -> None:
        """Start ``origin`` from what an earlier run left: its gap (never below the configured
        one), counted from ``last_contact`` (naive UTC, when that run finished with the host), so
        a run that starts right after another one keeps the gap too. A host this pacer already
        spaced keeps its own, fresher state."""
        with self._lock:
            if origin in self._hosts:
                return
            delay = self.base_delay_s if delay_ms is None else delay_ms / 1000.0
            state = self._hosts[origin] = _HostState(min(self.max_delay_s, max(self.base_delay_s, delay)),
                                                     self.base_delay_s, self.concurrency)
            if last_contact is not None:
                ago = (datetime.now(UTC).replace(tzinfo=None) - last_contact).total_seconds()
                state.last_start = state.last_end = time.monotonic() - max(0.0, ago)

    def set_policy(self, origin: str, base_delay_s: float, concurrency: int) -> None:
        """Give ``origin`` its own base gap and requests in flight (its crawls' politeness, already
        clamped by the caller). The current gap never drops below the new base; a longer gap it
        learned (back-off) stays and decays to the new base."""
        state = self._state(origin)
        with state.changed:
            state.base_s = base_delay_s
            state.concurrency = max(1, concurrency)
            state.delay_s = min(max(self.max_delay_s, base_delay_s), max(state.delay_s, base_delay_s))
            state.changed.notify_all()

    def delay_s(self, origin: str) -> float:
        return self._state(origin).delay_s

    def ready_at(self, origin: str) -> float:
        """The ``time.monotonic()`` at which :meth:`turn` would let the next request to ``origin``
        start without waiting, as things stand (with the Crawl-delay its latest request had).
        The fetcher's workers take the host whose turn comes first, so no worker sleeps on one
        host while another is ready."""
        state = self._state(origin)
        with state.lock:
            gap = max(state.delay_s, state.floor_s)
            allowed = state.concurrency if gap <= state.base_s else 1
            if allowed == 1 or state.in_flight >= allowed:
                return max(state.last_start + gap, state.last_end + gap)
            return state.last_start + gap

    @contextmanager
    def turn(self, origin: str, floor_s: float = 0.0) -> Iterator[None]:
        """One request to ``origin``: waits for its turn, and marks when it was over, so the next
        request starts at least the delay after this one *ended*. Counting from the end is what
        the server sees as the gap, whatever connection setup or transfer took.

        With ``concurrency`` above 1, a healthy host (gap not raised by slowness, 429/503 or a
        Crawl-delay ``floor_s``) may have that many requests in flight, their starts the delay
        apart; a host that pushed back gets one at a time again."""
        state = self._state(origin)
        with state.changed:
            while True:
                gap = max(state.delay_s, floor_s)
                allowed = state.concurrency if gap <= state.base_s else 1
                if state.in_flight < allowed:
                    break
                state.changed.wait()
            now = time.monotonic()
            start = max(now, state.last_start + gap, state.last_end + gap if allowed == 1 else now)
            state.last_start = start
            state.floor_s = floor_s
            state.in_flight += 1
            state.touched = True
        if start > now:
            time.sleep(start - now)
        try:
            yield
        finally:
            with state.changed:
                state.last_end = time.monotonic()
                state.in_flight -= 1
                state.changed.notify_all()

    def observe(self, origin: str, latency_s: float | None, status: int | None) -> None:
        """Feed back one outcome: a response (``status``, ``latency_s``) or a connection failure (both None)."""
        state = self._state(origin)
        with state.lock:
            old = state.delay_s
            if status is None:
                # Not an overload signal (a refused or reset connection): the retry backoff spaces
                # the next attempt, and enough of these in a row end the host for this run.
                state.connection_failures += 1
            elif status in THROTTLE_STATUSES:
                state.delay_s = min(max(self.max_delay_s, state.base_s), max(2 * old, self.throttle_delay_s))
                state.connection_failures = 0
            elif latency_s is not None and latency_s > self.slow_response_s:
                # The gap counts from the end of a response: waiting one response time after it
                # halves the load a slow server sees (requests start twice the latency apart).
                state.delay_s = min(self.max_delay_s, max(old, latency_s))
                state.connection_failures = 0
            else:
                decayed = old * self.decay
                state.delay_s = state.base_s if decayed - state.base_s < 0.01 else decayed
                state.delay_s = max(state.base_s, state.delay_s)
                state.connection_failures = 0

    def unreachable(self, origin: str) -> bool:
        return self._state(origin).connection_failures >= self.failure_limit

    def learned(self) -> dict[str, int]:
        """Gap in ms of every host this pacer spaced: what goes back to ``hosts.delay_ms``."""
        with self._lock:
            return {o: round(s.delay_s * 1000) for o, s in self._hosts.items() if s.touched}
