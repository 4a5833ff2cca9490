"""Which host a fetch worker serves next: the one whose turn comes first.

The fetcher (:mod:`crawl_platform.fetch.fetcher`) splits a batch into host queues (one per origin, or
``CRAWL_HOST_CONCURRENCY`` per origin) and runs ``CRAWL_FETCH_CONCURRENCY`` worker threads over
them. :class:`HostTurns` hands a worker one URL of the queue whose host
:meth:`~crawl_platform.fetch.politeness.HostPacer.ready_at` says can be asked soonest, and takes the queue
back when the request is over. A worker therefore never sleeps out one host's politeness gap
while another host is ready, and a batch of many hosts is paced by its busiest host, not by
hosts times gap over the worker count. A queue is out with at most one worker at a time, so a
host never gets more requests in flight than it has queues. The pacer still enforces the gap
itself; this only chooses the order.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

Item = TypeVar("Item")


class ReadyClock(Protocol):
    def ready_at(self, origin: str) -> float:
        """``time.monotonic()`` at which ``origin`` may be asked next."""
        ...


class HostTurns(Generic[Item]):
    """Host queues handed out in order of readiness; thread-safe.

    A worker calls ``take(previous)`` in a loop, passing the index it got last time (even if
    that request failed), and stops at None. A queue is handed out again while it has items.
    """

    def __init__(self, clock: ReadyClock, queues: Sequence[tuple[str, Sequence[Item]]]) -> None:
        self._clock = clock
        self._origins = [origin for origin, _ in queues]
        self._items = [deque(items) for _, items in queues]
        self._heap: list[tuple[float, int]] = []  # (ready at, queue index); index breaks ties
        self._changed = threading.Condition()
        for index, items in enumerate(self._items):
            if items:
                self._heap.append((clock.ready_at(self._origins[index]), index))
        heapq.heapify(self._heap)

    def take(self, previous: int | None = None) -> tuple[int, Item] | None:
        """The next ``(queue index, item)``, waiting until that host's turn; None when no queue
        is left to hand out (the worker then stops). ``previous`` is the queue the worker just
        used, given back here: if its host may be asked again at once (no gap), the worker keeps
        it (no hand-over for nothing)."""
        if previous is not None and self._items[previous]:
            ready = self._clock.ready_at(self._origins[previous])
            with self._changed:
                if ready <= time.monotonic():
                    return previous, self._items[previous].popleft()
                heapq.heappush(self._heap, (ready, previous))
                self._changed.notify()
        with self._changed:
            while self._heap:
                ready, index = self._heap[0]
                wait = ready - time.monotonic()
                if wait <= 0:
                    heapq.heappop(self._heap)
                    return index, self._items[index].popleft()
                self._changed.wait(wait)  # woken early when a queue comes back with an earlier turn
            return None  # whatever is left is out with other workers, who carry on with it

    def put_back(self, index: int, item: Item) -> None:
        """Return ``item``, taken from queue ``index`` but not served, to the front of its queue;
        the worker then calls ``take(index)``, which keeps the queue only if its host is ready
        (a worker that has just fetched the host's robots.txt hands the page on to wait out the gap)."""
        with self._changed:
            self._items[index].appendleft(item)
