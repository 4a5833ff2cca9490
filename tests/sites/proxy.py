"""A forward proxy on loopback, for the fetcher's proxy and network-guard tests.

`LoopbackProxy` is a tiny forward proxy (a `RecordingServer`: absolute-form GET and `CONNECT`
tunnels, optional Basic Proxy-Authorization) that only ever forwards to 127.0.0.0/8 and records
every request it was asked to forward as a `Seen` whose path is the absolute URL, or
``CONNECT host:port`` for a tunnel. The sites it forwards to are `tests.sites.hostile` and, for a
rendering browser's requests, `tests.sites.spa`.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import selectors
import socket
import time
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler

MAX_FORWARDED_BYTES = 16 * 1024 * 1024
HOP_BY_HOP_REQUEST = ("proxy-authorization", "proxy-connection", "connection")
NOT_PASSED_BACK = ("content-length", "transfer-encoding", "connection")


class _Handler(SeenHandler):
    def __init__(self, proxy: LoopbackProxy, *args: Any) -> None:
        self.proxy = proxy  # set first: the base class answers the request inside __init__
        super().__init__(*args)

    def answer(self, seen: Seen) -> None:
        if self.proxy.credentials and self.headers.get("Proxy-Authorization") != self.proxy.expected_auth():
            self.reply(seen, 407, b"proxy auth required", {"Proxy-Authenticate": 'Basic realm="test"'})
            return
        target = urlsplit(self.path)
        if not target.hostname or not ipaddress.ip_address(target.hostname).is_loopback:
            self.reply(seen, 403, b"this proxy only forwards to loopback", {})
            return
        upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=5)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP_REQUEST}
            upstream.request("GET", target.path + (f"?{target.query}" if target.query else ""), headers=headers)
            resp = upstream.getresponse()
            body = resp.read(MAX_FORWARDED_BYTES)
            passed = {k: v for k, v in resp.getheaders() if k.lower() not in NOT_PASSED_BACK}
            self.reply(seen, resp.status, body, {**passed, "Via": "1.1 loopback-proxy"})
        finally:
            upstream.close()

    def do_CONNECT(self) -> None:  # noqa: N802 -- http.server dispatches on this name
        """A tunnel to a loopback ``host:port``: both ways byte for byte until either side closes."""
        seen = Seen(f"CONNECT {self.path}", {k.lower(): v for k, v in self.headers.items()}, time.monotonic(),
                    self.client_address[1])
        self.server.record(seen)
        self.close_connection = True  # the connection is the tunnel's
        try:
            host, _, port = self.path.rpartition(":")
            if self.proxy.credentials and self.headers.get("Proxy-Authorization") != self.proxy.expected_auth():
                self.reply(seen, 407, b"proxy auth required", {"Proxy-Authenticate": 'Basic realm="test"'})
                return
            if not ipaddress.ip_address(host.strip("[]")).is_loopback:
                self.reply(seen, 403, b"this proxy only forwards to loopback", {})
                return
            with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as upstream:
                seen.status = 200
                self.send_response(200, "Connection Established")
                self.end_headers()
                self.wfile.flush()
                _relay(self.connection, upstream, self.proxy.stopping)
        except (ConnectionError, TimeoutError, OSError, ValueError):
            pass
        finally:
            seen.finished_at = time.monotonic()


def _relay(one: socket.socket, other: socket.socket, stopping: Any) -> None:
    """Copy bytes both ways between two sockets until either side closes (or the proxy stops)."""
    with selectors.DefaultSelector() as selector:
        selector.register(one, selectors.EVENT_READ, other)
        selector.register(other, selectors.EVENT_READ, one)
        while not stopping.is_set():
            for key, _events in selector.select(timeout=0.1):
                chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not chunk:
                    return
                key.data.sendall(chunk)


class LoopbackProxy(RecordingServer[Seen]):
    """A forward proxy on 127.0.0.1; with ``credentials`` ("user", "password") it demands Basic auth."""

    def __init__(self, credentials: tuple[str, str] | None = None, lifetime_s: float = 60.0) -> None:
        super().__init__(partial(_Handler, self), "127.0.0.1", name="proxy", lifetime_s=lifetime_s,
                         quiet_errors=(Exception,))
        self.credentials = credentials
        self.start()

    def expected_auth(self) -> str:
        assert self.credentials is not None
        token = base64.b64encode(":".join(self.credentials).encode()).decode()
        return f"Basic {token}"

    def url(self, userinfo: str = "") -> str:
        """The proxy's URL, with ``userinfo`` ("user:password") in it when given."""
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"
