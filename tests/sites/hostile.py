"""A hostile website on loopback, for the fetch-layer tests.

`HostileSite` is a real threaded HTTP/1.1 server on 127.0.0.x (a `RecordingServer`) that misbehaves
on purpose: slow trickles (in the headers or the body), endless bodies, gzip bombs, redirect loops
and chains, redirects to other addresses, 429 with Retry-After, flapping 503s, slow answers, pages in
awkward encodings, malformed HTML, trap URLs (an endless calendar, repeating path segments) and
validators for conditional requests -- the `ROUTES` table below, by first path segment -- plus
whatever robots.txt, static replies or routes of its own a test sets. It records every request it
parsed as a `Seen` (path, headers, start/end time, client port, status, bytes sent), so tests assert
what the server saw. Every route is bounded, and the site closes itself after `lifetime_s` even if a
test forgets to.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import cache, partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler

MAX_STREAM_BYTES = 256 * 1024 * 1024  # the most an "endless" body sends before giving up
PDF_BYTES = 64 * 1024 * 1024
GB18030_TEXT = "中文网页 欧元符号 € 与扩展汉字 𠀀 都在这里"
CP1251_TEXT = "Съешь же ещё этих мягких французских булок, да выпей чаю"


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Exchange:
    """One request being answered: what a route reads, and how it answers."""

    site: HostileSite
    handler: _Handler
    seen: Seen
    hit: int  # requests for this exact target so far, this one included
    rest: str = ""  # the path after the route's segment: "3" for /chain/3
    query: dict[str, str] = field(default_factory=dict)  # the first value of each parameter

    def send(self, reply: Reply) -> None:
        """A whole response: ``reply`` with its Content-Length (and text/html unless it says otherwise)."""
        self.start(reply.status, {"Content-Type": "text/html; charset=utf-8", **reply.headers,
                                  "Content-Length": str(len(reply.body))})
        self.write(reply.body)

    def start(self, status: int, headers: dict[str, str]) -> None:
        """The status line and exactly ``headers``, for a route that then streams its body."""
        self.seen.status = status  # before it goes out: a client that has its response may look at once
        self.handler.send_response(status)
        for name, value in headers.items():
            self.handler.send_header(name, value)
        self.handler.end_headers()

    def write(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()
        self.seen.bytes_sent += len(data)


Route = Callable[[Exchange], None]


def html_page(title: str, *hrefs: str, text: str = "") -> bytes:
    links = "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><h1>{title}</h1><p>{text or title}</p>{links}</body></html>").encode()


@cache
def gzip_bomb(decoded_bytes: int = 64 * 1024 * 1024) -> bytes:
    """A gzip body of ``decoded_bytes`` zeros (64 MiB -> about 64 KiB on the wire)."""
    return gzip.compress(b"\0" * decoded_bytes, compresslevel=9)


def hang_up(ex: Exchange) -> None:
    """A route that closes the connection without a response (a network error for the client)."""
    ex.handler.close_connection = True


# --- the built-in routes ---------------------------------------------------------------------------

def robots_txt(ex: Exchange) -> None:
    robots = ex.site.robots
    ex.send(Reply(robots.status, robots.body, {"Content-Type": "text/plain", **robots.headers}))


def numbered_page(ex: Exchange) -> None:
    n = int(ex.rest or 0)
    ex.send(Reply(200, html_page(f"Page {n}", f"/page/{n + 1}")))


def trickled_body(ex: Exchange) -> None:
    """200 with a declared body sent one byte per ``interval`` seconds (default 1 byte/s)."""
    total, interval = int(ex.query.get("bytes", 600)), float(ex.query.get("interval", 1.0))
    ex.start(200, {"Content-Type": "text/html", "Content-Length": str(total)})
    for _ in range(total):
        if ex.site.stopping.wait(interval):
            return
        ex.write(b"x")


def trickled_headers(ex: Exchange) -> None:
    """A status line, then one header line per ``interval`` seconds, never finishing the head."""
    interval = float(ex.query.get("interval", 0.5))
    ex.handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
    ex.seen.status = 200
    for k in range(90):
        if ex.site.stopping.wait(interval):
            return
        ex.handler.wfile.write(f"X-Slow-{k}: {'y' * 10}\r\n".encode())


def endless_body(ex: Exchange) -> None:
    """No Content-Length, connection close: a body that goes on until the client hangs up."""
    ex.start(200, {"Content-Type": "text/html", "Connection": "close"})
    ex.handler.close_connection = True
    chunk = b"<p>" + b"all work and no play " * 3000 + b"</p>\n"
    while ex.seen.bytes_sent < MAX_STREAM_BYTES and not ex.site.stopping.is_set():
        ex.write(chunk)


def gzip_bomb_page(ex: Exchange) -> None:
    ex.send(Reply(200, gzip_bomb(), {"Content-Encoding": "gzip"}))


def large_pdf(ex: Exchange) -> None:
    """A large body of a type the crawler does not parse, sent slowly enough to notice reading."""
    ex.start(200, {"Content-Type": "application/pdf", "Content-Length": str(PDF_BYTES)})
    for _ in range(PDF_BYTES // (64 * 1024)):
        ex.write(b"%PDF" * 16 * 1024)


def drop_then_answer(ex: Exchange) -> None:
    """Hang up without answering for the first ``times`` hits of this URL, then a page."""
    if ex.hit <= int(ex.query.get("times", 1)):
        hang_up(ex)
    else:
        ex.send(Reply(200, html_page("Answered at last")))


def redirect_loop(ex: Exchange) -> None:
    ex.send(Reply(302, b"", {"Location": "/loop/b" if ex.rest == "a" else "/loop/a"}))


def redirect_chain(ex: Exchange) -> None:
    n = int(ex.rest)
    if n == 0:
        ex.send(Reply(200, html_page("End of the chain")))
    else:
        ex.send(Reply(301, b"moved", {"Location": f"/chain/{n - 1}"}))


def redirect_to(ex: Exchange) -> None:
    ex.send(Reply(int(ex.query.get("code", 302)), b"", {"Location": ex.query["to"]}))


def status_code(ex: Exchange) -> None:
    """``/status/<code>?times=k&retry_after=v``: ``code`` for the first k hits, then a page."""
    if ex.hit <= int(ex.query.get("times", 1_000_000)):
        headers = {"Retry-After": ex.query["retry_after"]} if "retry_after" in ex.query else {}
        ex.send(Reply(int(ex.rest), html_page(f"Status {ex.rest}"), headers))
    else:
        ex.send(Reply(200, html_page("Recovered")))


def flapping_503(ex: Exchange) -> None:
    """503 on odd hits of this URL, 200 on even ones."""
    ex.send(Reply(503 if ex.hit % 2 else 200, html_page("Flapping")))


def slow_page(ex: Exchange) -> None:
    ex.site.stopping.wait(int(ex.query.get("ms", 300)) / 1000.0)
    ex.send(Reply(200, html_page("Slow")))


def encoded_page(ex: Exchange) -> None:
    ex.send(_encoded_page(ex.rest))


def malformed_html(ex: Exchange) -> None:
    body = (b"<html><head><title>Malformed</title><body><div><p>Unclosed <a href='/page/1'>"
            b"first link<p>second\x00paragraph <table><tr><td>cell</div></span>"
            + b"<div>" * 1000 + b"deep text" + b"<a href=\"/page/2\">deep link</a>"
            + b"<!-- unterminated comment")
    ex.send(Reply(200, body))


def endless_calendar(ex: Exchange) -> None:
    """Every month links to the next one."""
    year, month = (int(x) for x in ex.rest.split("/")[:2])
    nxt = f"/cal/{year + month // 12}/{month % 12 + 1}"
    ex.send(Reply(200, html_page(f"Calendar {year}-{month:02}", nxt)))


def repeating_path(ex: Exchange) -> None:
    """A relative link that adds a path segment each time: /loop-path/x/ -> /loop-path/x/x/ ..."""
    ex.send(Reply(200, html_page("Repeats", "x/")))


def versioned_page(ex: Exchange) -> None:
    """Validators of ``site.etag_version``; 304 when the request's own validators match them."""
    version = ex.site.etag_version
    tag = f'"v{version}"'
    modified = formatdate(1_700_000_000 + version * 86_400, usegmt=True)
    validators = {"ETag": tag, "Last-Modified": modified}
    headers = ex.seen.headers
    if headers.get("if-none-match") == tag or (
            "if-none-match" not in headers and headers.get("if-modified-since") == modified):
        ex.send(Reply(304, b"", validators))
    else:
        ex.send(Reply(200, html_page(f"Version {version}"), validators))


# Every built-in URL, by its first path segment; a test's own `routes` and `static` replies come first.
ROUTES: dict[str, Route] = {
    "/robots.txt": robots_txt,            # whatever the test set as `site.robots` (a 404 by default)
    "/page": numbered_page,               # /page/<n>: a page linking to /page/<n+1>
    "/trickle": trickled_body,            # ?bytes=600&interval=1.0: a declared body, a byte per interval
    "/trickle-headers": trickled_headers,  # ?interval=0.5: header lines one by one, the head never ends
    "/huge": endless_body,                # streams until the client hangs up (or MAX_STREAM_BYTES)
    "/gzip-bomb": gzip_bomb_page,         # about 64 KiB of gzip that decodes to 64 MiB
    "/pdf": large_pdf,                    # PDF_BYTES of application/pdf
    "/drop": drop_then_answer,            # ?times=1: hang up on the first <times> hits, then a page
    "/loop": redirect_loop,               # /loop/a <-> /loop/b, 302 for ever
    "/chain": redirect_chain,             # /chain/<n>: 301 to /chain/<n-1>, a page at 0
    "/redirect": redirect_to,             # ?to=<url>&code=302
    "/status": status_code,               # /status/<code>?times=k&retry_after=v
    "/flap": flapping_503,                # 503 on odd hits, 200 on even ones
    "/slow": slow_page,                   # ?ms=300 before a page
    "/enc": encoded_page,                 # /enc/<gb18030|meta|undeclared|broken|bogus-label>
    "/malformed": malformed_html,         # unclosed tags, a NUL, 1000 nested <div>s, an open comment
    "/cal": endless_calendar,             # /cal/<year>/<month>: links to the next month, for ever
    "/loop-path": repeating_path,         # links "x/": /loop-path/x/ -> /loop-path/x/x/ ...
    "/etag": versioned_page,              # ETag and Last-Modified; 304 to a matching conditional GET
}


class _Handler(SeenHandler):
    def __init__(self, site: HostileSite, *args: Any) -> None:
        self.site = site  # set first: the base class answers the request inside __init__
        super().__init__(*args)

    def answer(self, seen: Seen) -> None:
        self.site.dispatch(Exchange(self.site, self, seen, self.site.hit(self.path)))


class HostileSite(RecordingServer[Seen]):
    """The misbehaving server; a context manager. ``robots``, ``static`` and ``routes`` are set by tests."""

    def __init__(self, host: str = "127.0.0.1", lifetime_s: float = 60.0) -> None:
        # Clients cutting it off mid-response are what these tests provoke: no tracebacks.
        super().__init__(partial(_Handler, self), host, name="hostile", lifetime_s=lifetime_s,
                         quiet_errors=(Exception,))
        self.robots: Reply = Reply(404, b"no robots here")
        self.static: dict[str, Reply] = {}  # by exact target or path
        self.routes: dict[str, Route] = {}  # by exact target or path; before `static` and ROUTES
        self.etag_version = 1
        self._hits: Counter[str] = Counter()
        self._hits_lock = threading.Lock()
        self.start()

    def url(self, path: str) -> str:
        return self.base_url + path

    def settle(self, seconds: float = 0.05) -> None:
        """Let handlers that are still writing finish their records."""
        deadline = time.monotonic() + 2.0
        while any(s.finished_at == 0.0 for s in self.requests) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(seconds)

    def hit(self, target: str) -> int:
        """Count one more request for ``target``; the count, this one included."""
        with self._hits_lock:
            self._hits[target] += 1
            return self._hits[target]

    def dispatch(self, ex: Exchange) -> None:
        target = ex.seen.path
        parts = urlsplit(target)
        path = parts.path
        own = self.routes.get(target) or self.routes.get(path)
        if own is not None:
            own(ex)
            return
        reply = self.static.get(target) or self.static.get(path)
        if reply is not None:
            ex.send(reply)
            return
        head, _, rest = path.strip("/").partition("/")
        route = ROUTES.get(f"/{head}")
        if route is None:
            ex.send(Reply(404, html_page("Not found")))
            return
        ex.rest, ex.query = rest, {k: v[0] for k, v in parse_qs(parts.query).items()}
        route(ex)


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
        raw = b"<html><head><title>Broken bytes</title></head><body><p>before " + \
            b"\xff\xfe\xc3\x28 \xed\xa0\x80" + " after — still readable</p></body></html>".encode()
        return Reply(200, raw, {"Content-Type": "text/html; charset=utf-8"})
    if kind == "bogus-label":  # a label no codec has
        return Reply(200, "<title>Bogus</title><p>naïve café</p>".encode(),
                     {"Content-Type": "text/html; charset=x-no-such-charset"})
    return Reply(404, b"")
