"""Tests of the generated demo site and its loopback server (crawl_platform.cli.demo_site)."""

from __future__ import annotations

import http.client
import socket
import time
from collections import deque
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import pytest
import requests

from crawl_platform.cli.demo_site import DemoSite, SiteServer


@pytest.fixture(scope="module")
def site() -> DemoSite:
    return DemoSite(n_pages=60, seed=3)


@pytest.fixture
def server(site: DemoSite) -> Iterator[SiteServer]:
    with site.serve() as srv:
        yield srv


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v is not None]


def _polite_crawl(base: str) -> set[str]:
    """An independent reference crawler over real HTTP: what expected_urls must agree with."""
    robots = RobotFileParser(base + "/robots.txt")
    robots.read()
    host = urlsplit(base).netloc
    seen, queue, landed = {base + "/"}, deque([base + "/"]), set()
    with requests.Session() as http:
        while queue:
            url = queue.popleft()
            if not robots.can_fetch("demo-test", url):
                continue
            resp = http.get(url, timeout=5)
            landed.add(url)
            if resp.status_code != 200 or not resp.headers["Content-Type"].startswith("text/html"):
                continue
            parser = _Links()
            parser.feed(resp.text)
            for href in parser.hrefs:
                target = urldefrag(urljoin(resp.url, href))[0]
                parts = urlsplit(target)
                if parts.scheme == "http" and parts.netloc == host and target not in seen:
                    seen.add(target)
                    queue.append(target)
    return landed


def test_same_seed_same_site_and_other_seed_differs() -> None:
    a, b, c = DemoSite(40, seed=9), DemoSite(40, seed=9), DemoSite(40, seed=10)
    assert a.paths() == b.paths()
    assert all(a.body(p) == b.body(p) and a.page(p) == b.page(p) for p in a.paths())
    assert a.body("/data.json") == b.body("/data.json")
    assert any(a.body(p) != c.body(p) for p in a.paths())


def test_every_page_reachable_and_expected_url_rules(site: DemoSite) -> None:
    base = "http://127.0.0.1:8"
    urls = site.expected_urls(base)
    assert {f"{base}/page/{k}" for k in range(site.n_pages)} <= urls
    for path in ("/", "/missing", "/old-home", "/page/1", "/data.json"):
        assert base + path in urls
    assert all(u.startswith(base + "/") and "#" not in u for u in urls)
    assert not any("/private/" in u or "from-json" in u for u in urls)
    assert len(urls) == site.n_pages + 4
    assert site.expected_urls(base + "/") == urls  # trailing slash on the base is tolerated


def test_links_cover_the_tricky_cases(site: DemoSite) -> None:
    hrefs = [h for p in site.paths() for h in site.page(p).links]  # type: ignore[union-attr]
    assert any("#section-" in h for h in hrefs)
    assert any(h.startswith("../page/") for h in hrefs)
    specials = {"mailto:x@example.invalid", "javascript:void(0)", "/missing", "/old-home", "/data.json"}
    assert specials <= set(hrefs)
    assert any(h.startswith("http://127.0.0.2:") and h.endswith("/elsewhere") for h in hrefs)
    assert any(h.startswith("/private/") for p in site.paths() if not p.startswith("/private/")
               for h in site.page(p).links)  # type: ignore[union-attr]
    pages = [site.page(p) for p in site.paths()]
    assert any(len(set(pg.links)) < len(pg.links) for pg in pages if pg is not None)  # in-page duplicates
    assert site.page("/missing") is None
    assert site.page("/page/3").title  # type: ignore[union-attr]


def test_depth_limited_expectations(site: DemoSite) -> None:
    base = "http://127.0.0.1:8"
    assert site.expected_urls_within_depth(base, 0) == {base + "/"}
    depth1 = site.expected_urls_within_depth(base, 1)
    assert base + "/page/1" in depth1
    assert base + "/old-home" not in depth1
    sizes = [len(site.expected_urls_within_depth(base, d)) for d in range(12)]
    assert sizes == sorted(sizes)
    assert site.expected_urls_within_depth(base, 1000) == site.expected_urls(base)


def test_offsite_and_absolute_links_use_the_served_port() -> None:
    site = DemoSite(30, seed=1)
    with site.serve() as srv:
        hrefs = {h for p in site.paths() for h in site.page(p).links}  # type: ignore[union-attr]
        assert f"http://127.0.0.2:{srv.port}/elsewhere" in hrefs
        assert f"http://127.0.0.2:{srv.port}/elsewhere".encode() in b"".join(map(site.body, site.paths()))
        assert not any(h.startswith("http://127.0.0.1:0") for h in hrefs)


def test_reference_crawl_lands_exactly_the_expected_urls(site: DemoSite, server: SiteServer) -> None:
    assert _polite_crawl(server.base_url) == site.expected_urls(server.base_url)
    assert server.request_count("/private/0") == 0


def test_server_responses(site: DemoSite, server: SiteServer) -> None:
    base = server.base_url
    assert base == f"http://127.0.0.1:{server.port}"
    robots = requests.get(base + "/robots.txt", timeout=5)
    assert robots.status_code == 200
    assert "Disallow: /private/" in robots.text
    assert "User-agent: *" in robots.text
    home = requests.get(base + "/", timeout=5)
    assert home.headers["Content-Type"] == "text/html; charset=utf-8"
    assert home.content == site.body("/")
    for path in ("/missing", "/no/such/path"):
        assert requests.get(base + path, timeout=5).status_code == 404
    moved = requests.get(base + "/old-home", allow_redirects=False, timeout=5)
    assert moved.status_code == 301
    assert moved.headers["Location"] == "/page/1"
    followed = requests.get(base + "/old-home", timeout=5)
    assert followed.url == base + "/page/1"
    assert followed.content == site.body("/page/1")
    data = requests.get(base + "/data.json", timeout=5)
    assert data.headers["Content-Type"] == "application/json"
    assert data.json()["pages"] == site.n_pages
    assert requests.get(base + "/private/1", timeout=5).status_code == 200  # disallowed, yet served
    head = requests.head(base + "/page/2", timeout=5)
    assert head.status_code == 200
    assert head.content == b""
    assert int(head.headers["Content-Length"]) == len(site.body("/page/2"))


def test_set_page_text_changes_exactly_one_body() -> None:
    site = DemoSite(30, seed=5)
    before = {p: site.body(p) for p in site.paths()}
    links = site.page("/page/7").links  # type: ignore[union-attr]
    site.set_page_text("/page/7", "Fresh <news> today.\n\nSecond paragraph.")
    changed = {p for p in site.paths() if site.body(p) != before[p]}
    assert changed == {"/page/7"}
    assert b"Fresh &lt;news&gt; today." in site.body("/page/7")
    assert site.page("/page/7").links == links  # type: ignore[union-attr]
    with site.serve() as srv:
        assert requests.get(srv.base_url + "/page/7", timeout=5).content == site.body("/page/7")
        site.set_page_text("/page/7", "Third version.")
        assert b"Third version." in requests.get(srv.base_url + "/page/7", timeout=5).content


def test_request_log_and_keep_alive(server: SiteServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for path in ("/page/0", "/page/0", "/missing"):
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
    local_port = conn.sock.getsockname()[1]
    conn.close()
    # The server records a request just after answering it: give the last record a moment.
    deadline = time.monotonic() + 2.0
    while len(server.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.path for r in server.requests] == ["/page/0", "/page/0", "/missing"]
    assert [r.status for r in server.requests] == [200, 200, 404]
    assert {r.client_port for r in server.requests} == {local_port}  # one connection reused
    assert all(r.started_at <= r.finished_at for r in server.requests)
    assert server.request_count("/page/0") == 2
    assert server.request_count("/nowhere") == 0


def test_keep_alive_has_no_delayed_ack_stalls(server: SiteServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    start = time.perf_counter()
    for _ in range(200):
        conn.request("GET", "/page/1")
        conn.getresponse().read()
    conn.close()
    assert time.perf_counter() - start < 2.0  # a 40 ms stall per request would take 8 s


def test_close_stops_serving_even_idle_keep_alive_connections(site: DemoSite) -> None:
    srv = site.serve()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("GET", "/")
    conn.getresponse().read()
    srv.close()
    assert conn.sock.recv(1) == b""  # the server hung up the idle keep-alive connection
    conn.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="n_pages"):
        DemoSite(1)
    with pytest.raises(KeyError, match=r"^'/missing'$"):  # a 404 has no 200 body
        DemoSite(5).body("/missing")
