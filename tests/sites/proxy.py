"""A forward proxy on loopback, for the fetcher's proxy and network-guard tests.

`LoopbackProxy` is a tiny forward proxy (a `RecordingServer`: absolute-form GET only, optional Basic
Proxy-Authorization) that only ever forwards to 127.0.0.0/8 and records every request it was asked
to forward as a `Seen` whose path is the absolute URL. The sites it forwards to are
`tests.sites.hostile`.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
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
            self._reply(seen, 407, b"proxy auth required", {"Proxy-Authenticate": 'Basic realm="test"'})
            return
        target = urlsplit(self.path)
        if not target.hostname or not ipaddress.ip_address(target.hostname).is_loopback:
            self._reply(seen, 403, b"this proxy only forwards to loopback", {})
            return
        upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=5)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP_REQUEST}
            upstream.request("GET", target.path + (f"?{target.query}" if target.query else ""), headers=headers)
            resp = upstream.getresponse()
            body = resp.read(MAX_FORWARDED_BYTES)
            passed = {k: v for k, v in resp.getheaders() if k.lower() not in NOT_PASSED_BACK}
            self._reply(seen, resp.status, body, {**passed, "Via": "1.1 loopback-proxy"})
        finally:
            upstream.close()

    def _reply(self, seen: Seen, status: int, body: bytes, headers: dict[str, str]) -> None:
        # Recorded before the reply goes out: a client that has its response may look at once.
        seen.status, seen.bytes_sent = status, len(body)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


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
