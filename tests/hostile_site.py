"""A hostile website and a forward proxy on loopback, for the fetch-layer tests.

`HostileSite` is a real threaded HTTP/1.1 server on 127.0.0.x that misbehaves on purpose: slow
trickles (in the headers or the body), endless bodies, gzip bombs, redirect loops and chains,
redirects to other addresses, 429 with Retry-After, flapping 503s, slow answers, pages in
awkward encodings, malformed HTML, trap URLs (an endless calendar, repeating path segments),
validators for conditional requests, and whatever robots.txt or static response a test sets.
It records every request it parsed (path, headers, start/end time, client port, status, bytes
sent), so tests assert what the server saw. Every handler is bounded and the server closes
itself after `lifetime_s` even if a test forgets to.

`LoopbackProxy` is a tiny forward proxy (absolute-form GET only, optional Basic
Proxy-Authorization) that only ever forwards to 127.0.0.0/8.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import http.client
import ipaddress
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_STREAM_BYTES = 256 * 1024 * 1024  # the most an "endless" body sends before giving up
PDF_BYTES = 64 * 1024 * 1024
GB18030_TEXT = "中文网页 欧元符号 € 与扩展汉字 𠀀 都在这里"
CP1251_TEXT = "Съешь же ещё этих мягких французских булок, да выпей чаю"


@dataclass
class Seen:
    """One request as the server saw it."""

    path: str  # request target, query included (absolute-form for the proxy)
    headers: dict[str, str]  # lower-case names
    started_at: float  # time.monotonic()
    client_port: int
    finished_at: float = 0.0
    status: int | None = None
    bytes_sent: int = 0


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def html_page(title: str, *hrefs: str, text: str = "") -> bytes:
    links = "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><h1>{title}</h1><p>{text or title}</p>{links}</body></html>").encode()


@cache
def gzip_bomb(decoded_bytes: int = 64 * 1024 * 1024) -> bytes:
    """A gzip body of ``decoded_bytes`` zeros (64 MiB -> about 64 KiB on the wire)."""
    return gzip.compress(b"\0" * decoded_bytes, compresslevel=9)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, time.monotonic(),
                    self.client_address[1])
        with self.server.lock:
            self.server.seen.append(seen)
            self.server.hits[self.path] += 1
            hit = self.server.hits[self.path]
        try:
            self.server.owner._serve(self, seen, hit)
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True  # the client hung up: the point of most routes here
        finally:
            seen.finished_at = time.monotonic()

    def send(self, seen: Seen, reply: Reply) -> None:
        self.send_response(reply.status)
        headers = {"Content-Type": "text/html; charset=utf-8", **reply.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        seen.status = reply.status
        self.wfile.write(reply.body)
        seen.bytes_sent = len(reply.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], owner: HostileSite) -> None:
        super().__init__(address, _Handler)
        self.owner = owner
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        self.hits: Counter[str] = Counter()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients cutting us off mid-response is what these tests provoke


class HostileSite:
    """The misbehaving server; a context manager. ``robots`` and ``static`` are set by tests."""

    def __init__(self, host: str = "127.0.0.1", lifetime_s: float = 60.0) -> None:
        self.stopping = threading.Event()
        self._server = _Server((host, 0), self)
        self.port = int(self._server.server_address[1])
        self.base_url = f"http://{host}:{self.port}"
        self.robots: Reply = Reply(404, b"no robots here")
        self.static: dict[str, Reply] = {}
        self.routes: dict[str, Callable[[_Handler, Seen, int], None]] = {}
        self.etag_version = 1
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"hostile-{self.port}")
        self._thread.start()
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True
        self._timer.start()

    # --- what the tests read --------------------------------------------------------------------
    @property
    def requests(self) -> list[Seen]:
        with self._server.lock:
            return list(self._server.seen)

    def seen(self, path: str) -> list[Seen]:
        return [s for s in self.requests if s.path == path]

    def count(self, path: str) -> int:
        return len(self.seen(path))

    def settle(self, seconds: float = 0.05) -> None:
        """Let handlers that are still writing finish their records."""
        deadline = time.monotonic() + 2.0
        while any(s.finished_at == 0.0 for s in self.requests) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(seconds)

    def url(self, path: str) -> str:
        return self.base_url + path

    # --- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> HostileSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- routing --------------------------------------------------------------------------------
    def _serve(self, h: _Handler, seen: Seen, hit: int) -> None:
        parts = urlsplit(h.path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        if h.path in self.routes or path in self.routes:
            self.routes.get(h.path, self.routes.get(path))(h, seen, hit)  # type: ignore[misc]
            return
        if h.path in self.static or path in self.static:
            h.send(seen, self.static.get(h.path) or self.static[path])
            return
        head, _, rest = path.strip("/").partition("/")
        builtin = getattr(self, f"_route_{head.replace('-', '_').replace('.', '_')}", None)
        if builtin is None:
            h.send(seen, Reply(404, html_page("Not found")))
            return
        builtin(h, seen, hit, rest, query)

    def _route_robots_txt(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        h.send(seen, Reply(self.robots.status, self.robots.body,
                           {"Content-Type": "text/plain", **self.robots.headers}))

    def _route_page(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        n = int(rest or 0)
        h.send(seen, Reply(200, html_page(f"Page {n}", f"/page/{n + 1}")))

    def _route_trickle(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """200 with a declared body sent one byte per ``interval`` seconds (default 1 byte/s)."""
        total, interval = int(q.get("bytes", 600)), float(q.get("interval", 1.0))
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(total))
        h.end_headers()
        seen.status = 200
        for _ in range(total):
            if self.stopping.wait(interval):
                return
            h.wfile.write(b"x")
            h.wfile.flush()
            seen.bytes_sent += 1

    def _route_trickle_headers(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """A status line, then one header line per ``interval`` seconds, never finishing the head."""
        interval = float(q.get("interval", 0.5))
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        seen.status = 200
        for k in range(90):
            if self.stopping.wait(interval):
                return
            h.wfile.write(f"X-Slow-{k}: {'y' * 10}\r\n".encode())
            h.wfile.flush()

    def _route_huge(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """An endless body (no Content-Length, connection close) until the client hangs up."""
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Connection", "close")
        h.end_headers()
        seen.status = 200
        h.close_connection = True
        chunk = b"<p>" + b"all work and no play " * 3000 + b"</p>\n"
        while seen.bytes_sent < MAX_STREAM_BYTES and not self.stopping.is_set():
            h.wfile.write(chunk)
            seen.bytes_sent += len(chunk)

    def _route_gzip_bomb(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        h.send(seen, Reply(200, gzip_bomb(), {"Content-Encoding": "gzip"}))

    def _route_pdf(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """A large body of a type the crawler does not parse, sent slowly enough to notice reading."""
        h.send_response(200)
        h.send_header("Content-Type", "application/pdf")
        h.send_header("Content-Length", str(PDF_BYTES))
        h.end_headers()
        seen.status = 200
        for _ in range(PDF_BYTES // (64 * 1024)):
            h.wfile.write(b"%PDF" * 16 * 1024)
            seen.bytes_sent += 64 * 1024

    def _route_drop(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """Hang up without answering for the first ``times`` hits of this URL, then a page."""
        if hit <= int(q.get("times", 1)):
            hang_up(h, seen, hit)
        else:
            h.send(seen, Reply(200, html_page("Answered at last")))

    def _route_loop(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        h.send(seen, Reply(302, b"", {"Location": "/loop/b" if rest == "a" else "/loop/a"}))

    def _route_chain(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        n = int(rest)
        if n == 0:
            h.send(seen, Reply(200, html_page("End of the chain")))
        else:
            h.send(seen, Reply(301, b"moved", {"Location": f"/chain/{n - 1}"}))

    def _route_redirect(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        h.send(seen, Reply(int(q.get("code", 302)), b"", {"Location": q["to"]}))

    def _route_status(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """``/status/<code>?times=k&retry_after=v``: ``code`` for the first k hits, then a page."""
        if hit <= int(q.get("times", 1_000_000)):
            headers = {"Retry-After": q["retry_after"]} if "retry_after" in q else {}
            h.send(seen, Reply(int(rest), html_page(f"Status {rest}"), headers))
        else:
            h.send(seen, Reply(200, html_page("Recovered")))

    def _route_flap(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """503 on odd hits of this URL, 200 on even ones."""
        h.send(seen, Reply(503 if hit % 2 else 200, html_page("Flapping")))

    def _route_slow(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        self.stopping.wait(int(q.get("ms", 300)) / 1000.0)
        h.send(seen, Reply(200, html_page("Slow")))

    def _route_enc(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        h.send(seen, _encoded_page(rest))

    def _route_malformed(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        body = (b"<html><head><title>Malformed</title><body><div><p>Unclosed <a href='/page/1'>"
                b"first link<p>second\x00paragraph <table><tr><td>cell</div></span>"
                + b"<div>" * 1000 + b"deep text" + b"<a href=\"/page/2\">deep link</a>"
                + b"<!-- unterminated comment")
        h.send(seen, Reply(200, body))

    def _route_cal(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """An endless calendar: every month links to the next one."""
        year, month = (int(x) for x in rest.split("/")[:2])
        nxt = f"/cal/{year + month // 12}/{month % 12 + 1}"
        h.send(seen, Reply(200, html_page(f"Calendar {year}-{month:02}", nxt)))

    def _route_loop_path(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        """A relative link that adds a path segment each time: /loop-path/x/ -> /loop-path/x/x/ ..."""
        h.send(seen, Reply(200, html_page("Repeats", "x/")))

    def _route_etag(self, h: _Handler, seen: Seen, hit: int, rest: str, q: dict[str, str]) -> None:
        tag = f'"v{self.etag_version}"'
        modified = formatdate(1_700_000_000 + self.etag_version * 86_400, usegmt=True)
        validators = {"ETag": tag, "Last-Modified": modified}
        if seen.headers.get("if-none-match") == tag or (
                "if-none-match" not in seen.headers and seen.headers.get("if-modified-since") == modified):
            h.send(seen, Reply(304, b"", validators))
        else:
            h.send(seen, Reply(200, html_page(f"Version {self.etag_version}"), validators))


def hang_up(h: _Handler, seen: Seen, hit: int) -> None:
    """A route that closes the connection without a response (a network error for the client)."""
    h.close_connection = True


def _encoded_page(kind: str) -> Reply:
    if kind == "gb18030":  # header says gb2312, text needs GB18030 (the euro sign, an extension B character)
        body = f"<html><head><title>中文</title></head><body><p>{GB18030_TEXT}</p></body></html>"
        return Reply(200, body.encode("gb18030"), {"Content-Type": "text/html; charset=gb2312"})
    if kind == "meta":  # no charset in the header, only in a meta tag
        body = (f'<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
                f"<title>Кириллица</title></head><body><p>{CP1251_TEXT}</p></body></html>")
        return Reply(200, body.encode("cp1251"), {"Content-Type": "text/html"})
    if kind == "undeclared":  # declared nowhere: detection has to find cp1251
        body = f"<html><head><title>Без метки</title></head><body><p>{CP1251_TEXT} {CP1251_TEXT}</p></body></html>"
        return Reply(200, body.encode("cp1251"), {"Content-Type": "text/html"})
    if kind == "broken":  # declared UTF-8, with bytes that are not
        body = b"<html><head><title>Broken bytes</title></head><body><p>before " + \
            b"\xff\xfe\xc3\x28 \xed\xa0\x80" + " after — still readable</p></body></html>".encode()
        return Reply(200, body, {"Content-Type": "text/html; charset=utf-8"})
    if kind == "bogus-label":  # a label no codec has
        return Reply(200, "<title>Bogus</title><p>naïve café</p>".encode(),
                     {"Content-Type": "text/html; charset=x-no-such-charset"})
    return Reply(404, b"")


# --- the forward proxy ----------------------------------------------------------------------------

class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def do_GET(self) -> None:
        proxy = self.server.owner
        seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, time.monotonic(),
                    self.client_address[1])
        with self.server.lock:
            self.server.seen.append(seen)
        try:
            if proxy.credentials and self.headers.get("Proxy-Authorization") != proxy.expected_auth():
                self._reply(seen, 407, b"proxy auth required", {"Proxy-Authenticate": 'Basic realm="test"'})
                return
            target = urlsplit(self.path)
            if not target.hostname or not ipaddress.ip_address(target.hostname).is_loopback:
                self._reply(seen, 403, b"this proxy only forwards to loopback", {})
                return
            upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=5)
            try:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("proxy-authorization", "proxy-connection", "connection")}
                upstream.request("GET", target.path + (f"?{target.query}" if target.query else ""),
                                 headers=headers)
                resp = upstream.getresponse()
                body = resp.read(16 * 1024 * 1024)
                passed = {k: v for k, v in resp.getheaders()
                          if k.lower() not in ("content-length", "transfer-encoding", "connection")}
                self._reply(seen, resp.status, body, {**passed, "Via": "1.1 loopback-proxy"})
            finally:
                upstream.close()
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True
        finally:
            seen.finished_at = time.monotonic()

    def _reply(self, seen: Seen, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        seen.status, seen.bytes_sent = status, len(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: LoopbackProxy) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.owner = owner
        self.lock = threading.Lock()
        self.seen: list[Seen] = []

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class LoopbackProxy:
    """A forward proxy on 127.0.0.1; with ``credentials`` ("user", "password") it demands Basic auth."""

    def __init__(self, credentials: tuple[str, str] | None = None, lifetime_s: float = 60.0) -> None:
        self.credentials = credentials
        self._server = _ProxyServer(self)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"proxy-{self.port}")
        self._thread.start()
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True
        self._timer.start()
        self._closed = False

    def expected_auth(self) -> str:
        assert self.credentials is not None
        token = base64.b64encode(":".join(self.credentials).encode()).decode()
        return f"Basic {token}"

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[Seen]:
        with self._server.lock:
            return list(self._server.seen)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> LoopbackProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
