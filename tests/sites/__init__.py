"""HTTP servers on loopback that the fetch-layer tests crawl, built on the engine's recording server.

`tests.sites.hostile` is a site that misbehaves on purpose (its route table reads at a glance),
`tests.sites.bad_pages` puts bad pages beside ordinary ones on it for a whole crawl, and
`tests.sites.proxy` a forward proxy that only reaches loopback. What both record of each request is
a `Seen`, made here by `SeenHandler` the moment a request arrives (so a test sees a request that is
still being answered), finished when the answer ends or the client hangs up. `dead_port()` gives
a port nobody listens on. The demo site the end-to-end tests crawl is the engine's
`crawl_platform.cli.demo_site`, on the same `RecordingServer`.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass

from crawl_platform.cli.recording_server import RecordingHandler, RecordingHTTPServer


@dataclass
class Seen:
    """One request as the server saw it."""

    path: str  # request target, query included (absolute-form for the proxy)
    headers: dict[str, str]  # lower-case names
    started_at: float  # time.monotonic()
    client_port: int
    finished_at: float = 0.0  # 0.0 while the answer is still being sent
    status: int | None = None
    bytes_sent: int = 0


class SeenHandler(RecordingHandler):
    """Records each GET as a `Seen` when it arrives; subclasses answer it in `answer`."""

    server: RecordingHTTPServer[Seen]

    def do_GET(self) -> None:  # noqa: N802 -- http.server dispatches on this name
        seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, time.monotonic(),
                    self.client_address[1])
        self.server.record(seen)
        try:
            self.answer(seen)
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True  # the client hung up: the point of most hostile routes
        finally:
            seen.finished_at = time.monotonic()

    def answer(self, seen: Seen) -> None:
        raise NotImplementedError

    def reply(self, seen: Seen, status: int, body: bytes, headers: dict[str, str]) -> None:
        """Answer with ``status``, ``headers`` and ``body``, recorded in ``seen`` before the reply
        goes out: a client that has its response may look at once."""
        seen.status, seen.bytes_sent = status, len(body)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
