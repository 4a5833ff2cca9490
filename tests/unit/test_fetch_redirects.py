"""Redirects (crawl_platform.fetch.fetcher): loops, the hop limit, the recorded chain, and every hop checked
against the crawl's scope, robots.txt and the network guard."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.urls import CrawlScope
from tests.sites.hostile import HostileSite, Reply
from tests.unit.conftest import loopback_fetcher


@pytest.fixture
def inner():
    """A second site on 127.0.0.2: the "internal" address a redirect must not reach by default."""
    with HostileSite("127.0.0.2") as site:
        yield site


def _redirect_to(site: HostileSite, target: str) -> str:
    return site.url("/redirect?to=" + quote(target, safe=""))


def test_a_redirect_loop_is_detected_and_its_chain_recorded(hostile):
    result = loopback_fetcher().fetch(hostile.url("/loop/a"))
    a, b = hostile.url("/loop/a"), hostile.url("/loop/b")
    assert result.status is None
    assert result.error == f"redirect loop: {a} -> {b} -> {a}"
    assert result.redirect_chain == (a, b)
    assert result.final_url == a
    hostile.settle()
    # Detected, not run to the limit.
    assert (hostile.request_count("/loop/a"), hostile.request_count("/loop/b")) == (1, 1)


def test_a_chain_within_the_limit_is_followed_and_recorded(hostile):
    result = loopback_fetcher(max_redirects=3).fetch(hostile.url("/chain/3"))
    assert result.status == 200
    assert result.error is None
    assert result.final_url == hostile.url("/chain/0")
    assert result.redirect_chain == tuple(hostile.url(f"/chain/{n}") for n in (3, 2, 1))
    assert b"End of the chain" in result.body


def test_a_chain_beyond_the_limit_is_an_error_and_its_end_never_requested(hostile):
    result = loopback_fetcher(max_redirects=2).fetch(hostile.url("/chain/3"))
    assert result.status is None
    assert result.error == "more than 2 redirects"
    assert len(result.redirect_chain) == 3
    hostile.settle()
    assert hostile.request_count("/chain/0") == 0


def test_a_redirect_leaving_the_crawl_scope_is_not_followed(hostile, inner):
    scope = CrawlScope.for_seeds("host", [hostile.url("/")], deny=[r"/page/7$"])
    fetcher = loopback_fetcher(allowed_networks=["127.0.0.0/8"])
    off_host = fetcher.fetch(FetchRequest(_redirect_to(hostile, inner.url("/page/1")), in_scope=scope.admits))
    denied = fetcher.fetch(FetchRequest(_redirect_to(hostile, hostile.url("/page/7")), in_scope=scope.admits))
    assert off_host.status is None
    assert off_host.error == f"redirect leaves the crawl's scope: {inner.url('/page/1')}"
    assert denied.error == f"redirect leaves the crawl's scope: {hostile.url('/page/7')}"
    hostile.settle()
    assert inner.requests == []
    assert hostile.request_count("/page/7") == 0
    # Without a scope the same redirect is followed.
    assert fetcher.fetch(_redirect_to(hostile, hostile.url("/page/7"))).status == 200


def test_a_redirect_to_a_robots_disallowed_url_is_not_followed(hostile):
    hostile.robots = Reply(200, b"User-agent: *\nDisallow: /page/\n")
    result = loopback_fetcher().fetch(_redirect_to(hostile, hostile.url("/page/3")))
    assert result.disallowed
    assert result.error == "disallowed by robots.txt"
    assert result.redirect_chain == (_redirect_to(hostile, hostile.url("/page/3")),)
    hostile.settle()
    assert hostile.request_count("/page/3") == 0


def test_a_redirect_to_a_refused_address_is_refused(hostile, inner):
    # Only 127.0.0.1 is allowed: 127.0.0.2 stands in for an internal network.
    result = loopback_fetcher(allowed_networks=["127.0.0.1/32"]).fetch(
        _redirect_to(hostile, inner.url("/page/1")))
    assert result.status is None
    assert result.error == "blocked address: 127.0.0.2, a loopback address"
    assert result.final_url == inner.url("/page/1")
    inner.settle()
    assert inner.requests == []
    # Allowing its network lets the same redirect through.
    allowed = loopback_fetcher(allowed_networks=["127.0.0.0/8"]).fetch(
        _redirect_to(hostile, inner.url("/page/1")))
    assert allowed.status == 200
    assert inner.request_count("/page/1") == 1


def test_redirect_bodies_are_not_kept(hostile):
    hostile.static["/moved"] = Reply(301, b"<a href='/page/5'>moved</a>" * 10_000, {"Location": "/page/2"})
    result = loopback_fetcher().fetch(hostile.url("/moved"))
    assert result.status == 200
    assert result.final_url == hostile.url("/page/2")
    assert b"Page 2" in result.body


def test_a_redirect_to_no_url_is_that_pages_error_and_the_batch_goes_on(hostile):
    """``Location: http://[`` is no URL (urljoin raises): the URL lands with the reason, and every
    other URL of the batch, on the same worker thread too, is fetched once."""
    bad = _redirect_to(hostile, "http://[")
    pages = [hostile.url(f"/page/{n}") for n in range(6)]
    results = loopback_fetcher(concurrency=1).fetch_all([bad, *pages])
    assert (results[bad].status, results[bad].error) == (None, "bad redirect: Invalid IPv6 URL")
    assert [results[url].status for url in pages] == [200] * 6
    hostile.settle()
    assert [hostile.request_count(f"/page/{n}") for n in range(6)] == [1] * 6
