"""Total deadlines for HTTP exchanges: one watchdog thread that cuts off responses that run late.

Socket timeouts bound each read, not a response: a server that trickles one byte a second, in
its headers or its body, never trips a read timeout. :data:`WATCHDOG` does: the transport opens
``WATCHDOG.limit(seconds)`` around an exchange, the connection classes of
:mod:`crawl_platform.fetch.transport` register themselves with :meth:`_Watchdog.attach` when they send
a request on that thread, and when the time is up the watchdog shuts the socket down, which
wakes the blocked reader with an error the transport reports as a deadline error.
One thread for the whole process, a heap of deadlines, nothing per request but a push.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

TICK_S = 0.05  # how late past its deadline a response may be cut off


class ExpiredDeadlineError(Exception):
    """Raised instead of sending a request whose deadline has already passed."""


class _Connection(Protocol):
    sock: socket.socket | None


@dataclass(eq=False)
class Deadline:
    """One exchange's deadline; ``expired`` once the watchdog cut it off."""

    at: float
    seconds: float
    connections: list[_Connection] = field(default_factory=list)
    expired: bool = False
    done: bool = False

    @property
    def message(self) -> str:
        return f"deadline exceeded: no complete response within {self.seconds:g}s"


_current = threading.local()


class _Watchdog:
    """Shuts down the sockets of exchanges past their deadline."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def limit(self, seconds: float) -> Iterator[Deadline]:
        """Every connection this thread sends a request on inside the block is cut off ``seconds`` from now."""
        deadline = Deadline(time.monotonic() + seconds, seconds)
        with self._cond:
            # Deadlines mostly arrive in order, so the thread needs waking only for a new earliest one.
            wake = not self._heap or deadline.at < self._heap[0][0]
            heapq.heappush(self._heap, (deadline.at, next(self._counter), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fetch-deadlines", daemon=True)
                self._thread.start()
            if wake:
                self._cond.notify()
        _current.deadline = deadline
        try:
            yield deadline
        finally:
            _current.deadline = None
            with self._cond:
                deadline.done = True  # its connection may go back to the pool: never touch it again

    def attach(self, conn: _Connection) -> None:
        """Called by a connection about to send a request on this thread."""
        deadline: Deadline | None = getattr(_current, "deadline", None)
        if deadline is None:
            return
        with self._cond:
            if deadline.expired:
                raise ExpiredDeadlineError(deadline.message)
            deadline.connections.append(conn)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                now = time.monotonic()
                if self._heap[0][0] > now:
                    # Waking at most every TICK_S: one wake serves every deadline due by then.
                    self._cond.wait(max(self._heap[0][0] - now, TICK_S))
                    continue
                while self._heap and self._heap[0][0] <= now:
                    _, _, deadline = heapq.heappop(self._heap)
                    if not deadline.done:
                        deadline.expired = True
                        for conn in deadline.connections:
                            _shutdown(conn.sock)


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
    # The plain-socket shutdown, also for TLS sockets: it only wakes the blocked reader, without
    # touching the TLS object another thread is inside of. OSError: already closed.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


WATCHDOG = _Watchdog()
