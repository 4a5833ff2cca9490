"""A threaded HTTP server on loopback that keeps a log of the requests it answered.

`RecordingServer` is what every crawl target served in-process shares: it binds a host on a free
port (or the one given), serves on a daemon thread once `start()` is called, keeps the records its
handler makes of each request (with monotonic start/finish times, so a caller can tell what this
host saw and how fast), and closes as a context manager -- idle keep-alive connections included, and
on a timer when `lifetime_s` is set. `RecordingHandler` is the request-handler base it expects:
HTTP/1.1 keep-alive, TCP_NODELAY, no per-request log lines, its connection tracked so close() can
hang it up. The demo site (`demo_site.SiteServer`) is built on it, and so are the tests' hostile
site and proxy; it knows nothing about what is served or what a record holds beyond its path.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseRequestHandler
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar


class Recorded(Protocol):
    """What the log needs of a record: the request target (query included) it is about."""

    @property
    def path(self) -> str: ...


R = TypeVar("R", bound=Recorded)


class RecordingHTTPServer(ThreadingHTTPServer, Generic[R]):
    """The listening socket, the request log and the open connections; handlers write to the log."""

    daemon_threads = True
    request_queue_size = 128  # benchmarks open many connections at once; the default 5 drops SYNs

    def __init__(self, address: tuple[str, int],
                 handler: Callable[[Any, Any, RecordingHTTPServer[R]], BaseRequestHandler],
                 quiet_errors: tuple[type[BaseException], ...]) -> None:
        super().__init__(address, handler)
        self.lock = threading.Lock()
        self.log: list[R] = []
        self.connections: set[socket.socket] = set()
        self.quiet_errors = quiet_errors

    def record(self, entry: R) -> None:
        with self.lock:
            self.log.append(entry)

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients hanging up mid-response (crawler timeouts, benchmark teardown) are normal, not tracebacks.
        if not isinstance(sys.exc_info()[1], self.quiet_errors):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class RecordingHandler(BaseHTTPRequestHandler):
    """Handler base: keep-alive HTTP/1.1, quiet, and its connection known to the server's close()."""

    protocol_version = "HTTP/1.1"
    # Head and body go out in one write; without TCP_NODELAY keep-alive still risks 40 ms delayed-ACK stalls.
    disable_nagle_algorithm = True
    server: RecordingHTTPServer[Any]

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        pass  # per-request stderr lines would dominate benchmark time and flood test output


class RecordingServer(Generic[R]):
    """A server on ``host``:``port`` (0: a free one) whose handler records each request as an ``R``.

    The socket is bound when this is built, so ``port`` and ``base_url`` are known at once; nothing
    is served until ``start()``, so a subclass can finish what its pages need to know (their own
    address) first. ``stopping`` is set by ``close()``: handlers that stream or wait watch it.
    """

    def __init__(self, handler: Callable[[Any, Any, RecordingHTTPServer[R]], BaseRequestHandler],
                 host: str = "127.0.0.1", port: int = 0, *, name: str = "recording-server",
                 lifetime_s: float | None = None,
                 quiet_errors: tuple[type[BaseException], ...] = (ConnectionError,)) -> None:
        """``lifetime_s``: close on a timer even if the owner forgets to; ``quiet_errors``: exceptions
        escaping a handler that are not printed (by default a client hanging up)."""
        self.stopping = threading.Event()
        self._server: RecordingHTTPServer[R] = RecordingHTTPServer((host, port), handler, quiet_errors)
        self.host = host
        self.port: int = int(self._server.server_address[1])
        self.base_url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{name}-{self.port}", daemon=True)
        self._timer: threading.Timer | None = None
        if lifetime_s is not None:
            self._timer = threading.Timer(lifetime_s, self.close)
            self._timer.daemon = True

    def start(self) -> None:
        """Begin serving on a daemon thread (and start the lifetime timer)."""
        self._thread.start()
        if self._timer is not None:
            self._timer.start()

    # ---- the request log ----------------------------------------------------------------------------
    @property
    def requests(self) -> list[R]:
        """Every request recorded so far, in the order recorded (a copy)."""
        with self._server.lock:
            return list(self._server.log)

    def seen(self, path: str) -> list[R]:
        """The records of requests for exactly ``path`` (query included)."""
        return [r for r in self.requests if r.path == path]

    def request_count(self, path: str) -> int:
        return len(self.seen(path))

    def clear_requests(self) -> None:
        """Forget the requests recorded so far (the server goes on recording)."""
        with self._server.lock:
            self._server.log.clear()

    # ---- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop serving, hang up every open connection, release the port; a second call does nothing."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._thread.ident is not None:  # shutdown() waits for serve_forever, which never ran otherwise
            self._server.shutdown()
        self._server.server_close()
        # Idle keep-alive connections would otherwise go on being served after close().
        with self._server.lock:
            for conn in list(self._server.connections):
                with contextlib.suppress(OSError):  # already closed by the client
                    conn.shutdown(socket.SHUT_RDWR)
        if self._thread.ident is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
