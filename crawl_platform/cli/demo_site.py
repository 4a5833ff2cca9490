"""Deterministic generated website and a threaded loopback HTTP server that serves it.

`DemoSite` builds a page graph from `(n_pages, seed)` -- a home page, `/page/<k>` articles linked by a
spanning tree plus random extra links, robots-disallowed `/private/<k>` pages, a 404 (`/missing`), a 301
(`/old-home` -> `/page/1`), a non-HTML `/data.json` and off-site/mailto/javascript links -- and knows the
exact set of URLs a correct host-scoped crawler must land (`expected_urls`). `SiteServer` serves it on
127.0.0.1 from pre-rendered bytes with HTTP/1.1 keep-alive and records every request (its lifecycle and
request log are `recording_server.RecordingServer`). The platform crawls it as its bundled demo site on
first start; the end-to-end tests and the benchmarks crawl it as a target whose answer is known in advance.
Nothing here knows about the crawler or the store.
"""

from __future__ import annotations

import html
import json
import random
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from crawl_platform.cli.recording_server import RecordingHandler, RecordingHTTPServer, RecordingServer

OFFSITE_HOST = "127.0.0.2"
PRIVATE_PREFIX = "/private/"
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
REDIRECTS = {"/old-home": "/page/1"}
N_PRIVATE = 3
HOME_FANOUT = 4
# Placeholders for hrefs that embed the server's address, which is unknown until serve() binds a port.
_SELF = "\x00self"
_OFFSITE = "\x00offsite"
_WORDS = (
    "crawler", "frontier", "politeness", "robots", "sitemap", "anchor", "fetch", "queue", "batch", "host",
    "domain", "depth", "page", "link", "index", "archive", "river", "mountain", "harbor", "lantern",
    "orchard", "meadow", "signal", "engine", "ledger", "market", "garden", "library", "window", "thunder",
    "silver", "copper", "morning", "evening", "journey", "village", "harvest", "compass", "voyage", "quiet",
    "bright", "ancient", "rapid", "gentle", "steady", "hidden", "open", "narrow", "distant", "careful",
    "curious", "simple", "builds", "follows", "records", "measures", "returns", "gathers", "visits",
    "reads", "writes", "keeps", "finds", "sorts",
)


@dataclass(frozen=True)
class SitePage:
    path: str
    title: str
    links: tuple[str, ...]  # hrefs exactly as written in the HTML, in document order, duplicates kept


@dataclass(frozen=True)
class RequestRecord:
    path: str  # request target as sent, query string included
    started_at: float  # time.monotonic()
    finished_at: float
    status: int
    client_port: int
    client_host: str = ""  # the client's address: which machine of a crawl asked


@dataclass
class _Article:
    title: str
    paragraphs: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (href with placeholders, anchor text)


class DemoSite:
    """Deterministic site graph: same (n_pages, seed) -> same pages, links and bodies."""

    def __init__(self, n_pages: int = 300, seed: int = 0, links_per_page: int = 8) -> None:
        if n_pages < 2 or links_per_page < 1:
            raise ValueError("need n_pages >= 2 (the redirect targets /page/1) and links_per_page >= 1")
        self.n_pages, self.seed, self.links_per_page = n_pages, seed, links_per_page
        self._origin = "http://127.0.0.1:0"
        self._offsite = f"http://{OFFSITE_HOST}:0"
        self._articles = self._generate(random.Random(seed))  # noqa: S311 -- reproducible, not secret
        self._wire: dict[str, tuple[bytes, bytes, int]] = {}
        for path in self._articles:
            self._render(path)
        not_found = b"<!DOCTYPE html>"  # no links, so a 404 adds nothing to the frontier
        not_found += b"<html><head><title>Not found</title></head><body><h1>404</h1></body></html>"
        self._not_found = (_head(404, "text/html; charset=utf-8", len(not_found)), not_found, 404)
        data = json.dumps({"site": "crawl-platform demo", "pages": n_pages, "seed": seed,
                           # Markup inside JSON is not a link: a crawler that scrapes it lands /from-json.
                           "html": '<a href="/from-json">not a link</a>'}).encode()
        robots = ROBOTS_TXT.encode()
        self._wire["/data.json"] = (_head(200, "application/json", len(data)), data, 200)
        self._wire["/robots.txt"] = (_head(200, "text/plain; charset=utf-8", len(robots)), robots, 200)
        for src, dst in REDIRECTS.items():
            moved = f"<html><body><p>Moved to {dst}</p></body></html>".encode()  # no <a>: adds no links
            head = _head(301, "text/html; charset=utf-8", len(moved), location=dst)
            self._wire[src] = (head, moved, 301)

    # ---- generation ---------------------------------------------------------------------------------
    def _generate(self, rng: random.Random) -> dict[str, _Article]:
        n = self.n_pages
        titles = [f"{' '.join(w.capitalize() for w in rng.sample(_WORDS, rng.randint(2, 4)))} {k}"
                  for k in range(n)]
        fanout = min(n, HOME_FANOUT)  # /page/1 sits at depth 1, so the redirect never adds a shallower URL
        children: list[list[int]] = [[] for _ in range(n)]
        for k in range(fanout, n):
            children[rng.randrange(k)].append(k)  # spanning tree: every page reachable from home

        def href(k: int) -> tuple[str, str]:
            r = rng.random()
            if r < 0.55:
                h = f"/page/{k}"
            elif r < 0.75:
                h = f"/page/{k}#section-{rng.randint(1, 3)}"
            elif r < 0.92:
                h = f"../page/{k}"  # document-relative: resolves against /page/<i>, and /old-home alike
            else:
                h = f"{_SELF}/page/{k}"  # absolute in-host form of the same URL
            return h, titles[k]

        links: dict[str, list[tuple[str, str]]] = {"/": [href(k) for k in range(fanout)]}
        links["/"] += [("#top", "Back to top"), (f"/page/{fanout - 1}", "Again")]
        for i in range(n):
            page = [href(k) for k in children[i]]
            page += [href(rng.randrange(n)) for _ in range(max(0, self.links_per_page - len(page)))]
            if rng.random() < 0.3:
                page.append(rng.choice(page))  # exact duplicate within the page
            if rng.random() < 0.2:
                page.append(("/", "Home"))
            rng.shuffle(page)
            links[f"/page/{i}"] = page
        specials = [("/missing", "A page that is gone"), ("/old-home", "Old home page"),
                    ("/data.json", "Raw data"), (f"{_OFFSITE}/elsewhere", "Elsewhere"),
                    ("mailto:x@example.invalid", "Mail us"), ("javascript:void(0)", "Do nothing")]
        specials += [(f"{PRIVATE_PREFIX}{rng.randrange(N_PRIVATE)}", "Staff only") for _ in range(2)]
        for special in specials:
            links[f"/page/{rng.randrange(n)}"].append(special)
        for p in range(N_PRIVATE):
            links[f"{PRIVATE_PREFIX}{p}"] = [(f"{PRIVATE_PREFIX}{(p + 1) % N_PRIVATE}", "Next secret"),
                                             ("/page/0", titles[0])]
        names = {"/": "Demo Site Home", **{f"/page/{k}": titles[k] for k in range(n)},
                 **{f"{PRIVATE_PREFIX}{p}": f"Private {p}" for p in range(N_PRIVATE)}}
        return {path: _Article(names[path], _paragraphs(rng), tuple(ls)) for path, ls in links.items()}

    # ---- rendering ----------------------------------------------------------------------------------
    def _href(self, href: str) -> str:
        return href.replace(_SELF, self._origin).replace(_OFFSITE, self._offsite)

    def _render(self, path: str) -> None:
        a = self._articles[path]
        e = html.escape
        sections = "".join(f'<h2 id="section-{i + 1}">Section {i + 1}</h2><p>{e(p)}</p>'
                           for i, p in enumerate(a.paragraphs))
        items = "".join(f'<li><a href="{e(self._href(h))}">{e(t)}</a></li>' for h, t in a.links)
        body = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(a.title)}</title>'
                f'</head>\n<body><a id="top"></a><h1>{e(a.title)}</h1>\n<article>{sections}</article>\n'
                f"<nav><ul>{items}</ul></nav>\n</body></html>\n").encode()
        # One dict assignment swaps head and body together, so a serving thread never sees a mix.
        self._wire[path] = (_head(200, "text/html; charset=utf-8", len(body)), body, 200)

    def _bind(self, host: str, port: int) -> None:
        self._origin, self._offsite = f"http://{host}:{port}", f"http://{OFFSITE_HOST}:{port}"
        for path in self._articles:
            self._render(path)

    # ---- public API ---------------------------------------------------------------------------------
    def page(self, path: str) -> SitePage | None:
        a = self._articles.get(path)
        return None if a is None else SitePage(path, a.title, tuple(self._href(h) for h, _ in a.links))

    def paths(self) -> list[str]:
        """Every HTML page path, private ones included (they are served, just disallowed)."""
        return list(self._articles)

    def body(self, path: str) -> bytes:
        """Bytes served with status 200 for `path` (HTML pages, /data.json, /robots.txt); KeyError otherwise.

        Pages with absolute or off-site links embed the address of the most recent serve() (port 0 before).
        """
        _, data, status = self._wire[path]
        if status != 200:
            raise KeyError(path)
        return data

    def set_page_text(self, path: str, text: str) -> None:
        a = self._articles[path]
        a.paragraphs = tuple(p.strip() for p in text.split("\n\n") if p.strip()) or (text,)
        self._render(path)

    def expected_urls(self, base_url: str) -> set[str]:
        return self._crawl(base_url, None)

    def expected_urls_within_depth(self, base_url: str, max_depth: int) -> set[str]:
        return self._crawl(base_url, max_depth)

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> SiteServer:
        return SiteServer(self, host, port)

    def _crawl(self, base_url: str, max_depth: int | None) -> set[str]:
        base = base_url.rstrip("/")
        netloc = urlsplit(base).netloc
        depth = {"/": 0}
        queue = deque(["/"])
        while queue:
            path = queue.popleft()
            page = self.page(path)
            if page is None or (max_depth is not None and depth[path] >= max_depth):
                continue  # non-HTML, 404 and redirects add no links; /page/1 is already at depth 1
            for h in page.links:
                parts = urlsplit(urldefrag(urljoin(base + path, h))[0])
                if parts.scheme not in ("http", "https") or parts.netloc != netloc:
                    continue
                target = parts.path or "/"
                if not target.startswith(PRIVATE_PREFIX) and target not in depth:
                    depth[target] = depth[path] + 1
                    queue.append(target)
        return {base + p for p in depth}

    def _response(self, path: str) -> tuple[bytes, bytes, int]:
        return self._wire.get(path, self._not_found)


def _paragraphs(rng: random.Random) -> tuple[str, ...]:
    def sentence() -> str:
        words = rng.choices(_WORDS, k=rng.randint(6, 14))
        return " ".join(words).capitalize() + "."

    return tuple(" ".join(sentence() for _ in range(rng.randint(3, 5))) for _ in range(rng.randint(3, 5)))


_REASONS = {200: "OK", 301: "Moved Permanently", 404: "Not Found"}


def _head(status: int, content_type: str, length: int, location: str | None = None) -> bytes:
    """Status line and headers without the final blank line (the handler adds Connection: close if needed)."""
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
             f"Content-Length: {length}", "Server: crawl-platform-demo"]
    if location is not None:
        lines.append(f"Location: {location}")
    return ("\r\n".join(lines) + "\r\n").encode()


class _Handler(RecordingHandler):
    server: RecordingHTTPServer[RequestRecord]

    def __init__(self, site: DemoSite, *args: Any) -> None:
        self.site = site  # set first: the base class answers the request inside __init__
        super().__init__(*args)

    def do_GET(self) -> None:  # noqa: N802 -- http.server dispatches on this name
        self._respond(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802 -- http.server dispatches on this name
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        started = time.monotonic()
        head, data, status = self.site._response(self.path.split("?", 1)[0])
        end = b"Connection: close\r\n\r\n" if self.close_connection else b"\r\n"
        self.wfile.write(head + end + data if send_body else head + end)
        self.server.record(RequestRecord(self.path, started, time.monotonic(), status, self.client_address[1],
                                         self.client_address[0]))


class SiteServer(RecordingServer[RequestRecord]):
    """A DemoSite served on a daemon thread; use as a context manager or call close().

    Each request is recorded just after it was answered; ``requests`` and ``request_count`` read the log.
    """

    def __init__(self, site: DemoSite, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(partial(_Handler, site), host, port, name="demo-site")
        self.site = site
        site._bind(host, self.port)  # absolute and off-site links name the port before any page is served
        self.start()
