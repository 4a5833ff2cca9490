"""A fetch step's watch on its crawls' control: pause and cancel take effect within about a second.

``crawl-platform pause|cancel`` (or the control run) changes ``crawls.state`` in the lake. A batch
planned before that fetches on: its plan step held back only the crawls paused or cancelled then.
:class:`ControlWatch` reads the states of a shard's crawls from the lake at most once every
``interval_s`` (one small read, from whichever fetch thread asks first once the interval is up;
the others go on with the states read last), and holds a request once every crawl that wants its
URL is paused or cancelled. A held URL has no result: it lands as a ``skipped`` item, as the plan
step's held URLs do, which leaves its frontier row as the command made it, ``paused`` (resume
publishes it again) or ``cancelled``. A request already sent finishes and lands as usual. The
render step asks the same of each page before its browser loads it.

A read that fails holds nothing new (the crawl goes on as it would without the watch) and is
tried again at the next interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from crawl_platform.fetch.results import FetchRequest
from crawl_platform.redaction import redact_passwords
from crawl_platform.states import CrawlState

log = logging.getLogger(__name__)

CrawlStates = Callable[[set[str]], dict[str, CrawlState]]  # the state of each crawl named (the lake's)
READ_INTERVAL_S = 1.0  # how stale a shard's view of its crawls' states may get


class ControlWatch:
    """Which of a set of crawls are paused or cancelled, read through ``states`` at most once every
    ``interval_s``; thread-safe. The first read comes one interval after it is made, as a fetch
    step's plan step has just read the same states (a shard fetched in less costs no read), or at
    the first question with ``read_first`` (a render step, which comes after the whole fetch)."""

    def __init__(self, states: CrawlStates, crawl_ids: Iterable[str], interval_s: float = READ_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, *, read_first: bool = False) -> None:
        self._states = states
        self._crawl_ids = set(crawl_ids)
        self._interval_s = interval_s
        self._clock = clock
        self._read_at = clock() - (interval_s if read_first else 0.0)
        self._held: frozenset[str] = frozenset()
        self._reading = threading.Lock()
        self._failed = False  # a read failed already (later failures are not worth a warning each)
        self.passed_over: list[str] = []  # the URLs held, in the order they were (appended from any thread)

    @classmethod
    def of(cls, states: CrawlStates | None, crawl_ids: Iterable[str], *, read_first: bool = False,
           ) -> ControlWatch | None:
        """A watch over ``crawl_ids``; None without a way to read states or without a crawl."""
        crawls = set(crawl_ids)
        return cls(states, crawls, read_first=read_first) if states is not None and crawls else None

    def holds(self, request: FetchRequest) -> bool:
        """Whether every crawl that wants ``request`` is paused or cancelled (as last read); a
        held request's URL is added to :attr:`passed_over`."""
        return self.holds_url(request.url, request.crawl_ids)

    def holds_url(self, url: str, crawl_ids: tuple[str, ...]) -> bool:
        """Whether every crawl of ``crawl_ids`` (those that want ``url``) is paused or cancelled."""
        if not crawl_ids:
            return False
        held = self.held()
        if held and all(c in held for c in crawl_ids):
            self.passed_over.append(url)
            return True
        return False

    def held(self) -> frozenset[str]:
        """The crawls paused or cancelled as last read; reads again once the interval is up."""
        if self._clock() - self._read_at >= self._interval_s and self._reading.acquire(blocking=False):
            try:
                if self._clock() - self._read_at >= self._interval_s:
                    self._held = self._read()
                    self._read_at = self._clock()
            finally:
                self._reading.release()
        return self._held

    def _read(self) -> frozenset[str]:
        try:
            states = self._states(self._crawl_ids)
        except Exception as err:  # a lake out of reach for a moment must not stop the fetch
            level = logging.DEBUG if self._failed else logging.WARNING  # once a step, not once a second
            self._failed = True
            log.log(level, "crawl states unreadable, fetching on: %s: %s", type(err).__name__,
                    redact_passwords(str(err)))
            return self._held
        return frozenset(c for c, state in states.items() if state is not CrawlState.ACTIVE)
