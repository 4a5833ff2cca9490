"""The crawl's proxies (``CRAWL_PROXIES``) carry a rendering browser's requests as they carry the
fetcher's, and the network guard still decides where they may go: a crawl of the single-page app
through a real forward proxy on loopback (``tests.sites.proxy``), and the guard proxy's tunnels
through it. Needs Debian's ``chromium`` for the crawl (``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.render.guard_proxy import GuardProxy
from crawl_platform.render.step import ShardRenderer
from tests.conftest import requires_browser
from tests.sites import dead_port
from tests.sites.proxy import LoopbackProxy
from tests.sites.spa import SpaSite
from tests.unit.crawl_rows import crawl_loop

SECRET = "s3cret-Pa55"


@pytest.fixture
def proxy() -> Iterator[LoopbackProxy]:
    with LoopbackProxy(("crawler", SECRET), lifetime_s=300) as forward:
        yield forward


@requires_browser
def test_a_rendering_crawls_requests_all_leave_through_the_crawls_proxy(settings, bus, store, proxy, monkeypatch):
    monkeypatch.setenv("TEST_PROXY_PASSWORD", SECRET)
    settings = settings.model_copy(update={"proxies": [proxy.url("crawler:${TEST_PROXY_PASSWORD}")]})
    renderer = ShardRenderer.from_settings(settings, archive=store.archive)
    loop = crawl_loop(settings, bus, store, Fetcher.from_settings(settings), renderer=renderer)
    with SpaSite(products=3) as spa:
        loop.crawler.frontier.register(CrawlRequest("proxied", (spa.base_url + "/",), 100, 5, "host", time.time(),
                                                    render="always"))
        try:
            loop.run_until_idle(max_turns=200)
        finally:
            loop.crawler.close()
        seen = spa.requests

    rendered = dict(store.query("SELECT url, rendered FROM pages WHERE crawl_id = 'proxied'"))
    assert rendered == dict.fromkeys(spa.pages, True)  # the links only the script writes were found
    # The browser's own requests (each page's script and its JSON) reached the site ...
    assert {s.path.split("?")[0] for s in seen} == {"/robots.txt", "/", "/product/1", "/product/2", "/product/3",
                                                  "/app.js", "/api/page"}
    # ... and every request the site saw, the fetcher's and the browser's, came through the proxy,
    # which had its credentials (it answers 407 without them) and kept them to itself.
    assert Counter(s.path for s in proxy.requests) == Counter(spa.base_url + s.path for s in seen)
    assert {s.status for s in proxy.requests} == {200}
    assert all("proxy-authorization" not in s.headers for s in seen)


def _through(proxy_urls: list[str], request: bytes, allowed: str = "127.0.0.1/32") -> tuple[bytes, ProxyPool]:
    """What the guard proxy answers ``request`` (a CONNECT and what goes through the tunnel), with
    ``proxy_urls`` behind it."""
    pool = ProxyPool(proxy_urls)

    async def run() -> bytes:
        guard = GuardProxy(NetworkGuard([allowed]), connect_timeout_s=2.0, proxies=pool)
        port = await guard.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer
        finally:
            await guard.close()

    return asyncio.run(run()), pool


def _connect(host: str, port: int) -> bytes:
    target = f"{host}:{port}"
    return (f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
            f"GET /robots.txt HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n").encode()


def test_a_tunnel_goes_through_the_crawls_proxy_and_a_dead_one_is_benched(proxy):
    dead = f"http://127.0.0.1:{dead_port()}"
    with SpaSite(products=1) as spa:
        answer, pool = _through([dead, proxy.url(f"crawler:{SECRET}")], _connect("127.0.0.1", spa.port))
        seen = [s.path for s in spa.requests]
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200")
    assert answer.endswith(b"Disallow: /private-api/\n")
    assert [(s.path, s.status) for s in proxy.requests] == [(f"CONNECT 127.0.0.1:{spa.port}", 200)]
    assert seen == ["/robots.txt"]
    assert pool.healthy() == [proxy.url(f"crawler:{SECRET}")]  # the dead proxy sits out


def test_the_guard_refuses_a_tunnel_before_it_reaches_the_crawls_proxy(proxy):
    with SpaSite(products=1, traps=True) as spa:
        assert spa.secret is not None
        answer, _pool = _through([proxy.url(f"crawler:{SECRET}")], _connect("127.0.0.2", spa.secret.port))
        assert spa.secret.requests == []
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"refused by the network guard: 127.0.0.2, a loopback address" in answer
    assert proxy.requests == []


def test_a_proxy_without_its_credentials_fails_the_tunnel_in_one_answer(proxy):
    with SpaSite(products=1) as spa:
        answer, pool = _through([proxy.url("crawler:wrong")], _connect("127.0.0.1", spa.port))
        assert spa.requests == []
    assert answer.startswith(b"HTTP/1.1 502 ")
    assert b"no proxy of the crawl answered: all 1 proxies failed, the last with: 407 Proxy Authentication " \
           b"Required" in answer
    assert b"wrong" not in answer
    assert pool.healthy() == []
