"""Outgoing proxies (crawl_platform.fetch.proxies, used by crawl_platform.fetch.transport) through a real forward
proxy on loopback: rotation, credentials from environment references, benching a failing proxy,
and no credentials in logs or errors."""

from __future__ import annotations

import base64
import logging

import pytest

from crawl_platform.fetch.proxies import ProxyConfigError, ProxyPool, expand_credentials
from crawl_platform.fetch.retry import RetryPolicy
from crawl_platform.redaction import redact_passwords as redact
from tests.sites import dead_port
from tests.sites.proxy import LoopbackProxy
from tests.unit.conftest import loopback_fetcher

SECRET = "s3cret-Pa55"
ENV = {"TEST_PROXY_PASSWORD": SECRET}


@pytest.fixture
def proxies():
    with LoopbackProxy(("crawler", SECRET)) as one, LoopbackProxy(("crawler", SECRET)) as two:
        yield one, two


# Each proxy is tried once per URL and robots.txt is not asked, so the proxies see only the pages.
DIRECT = {"obey_robots": False, "retry": RetryPolicy(max_attempts=1)}


def _expanded(proxy_urls: list[str]) -> tuple[str, ...]:
    """The proxy URLs as the fetcher gets them from settings: ${VAR} references filled from ENV."""
    return ProxyPool.from_settings_list(proxy_urls, ENV).proxies


def test_requests_rotate_over_the_proxies_with_credentials_from_the_environment(hostile, proxies):
    one, two = proxies
    ref = "crawler:${TEST_PROXY_PASSWORD}"
    fetcher = loopback_fetcher(**DIRECT, proxies=_expanded([one.url(ref), two.url(ref)]))
    results = fetcher.fetch_all([hostile.url(f"/page/{k}") for k in range(4)])
    assert all(r.status == 200 for r in results.values())
    assert (len(one.requests), len(two.requests)) == (2, 2)
    assert {s.headers["proxy-authorization"] for s in one.requests + two.requests} == {one.expected_auth()}
    assert {s.path for s in one.requests + two.requests} == {hostile.url(f"/page/{k}") for k in range(4)}
    hostile.settle()
    assert len(hostile.requests) == 4
    assert all("proxy-authorization" not in s.headers for s in hostile.requests)  # not passed upstream


def test_a_failing_proxy_is_benched_and_the_next_one_used(hostile, proxies, caplog):
    one, _ = proxies
    dead = f"http://crawler:${{TEST_PROXY_PASSWORD}}@127.0.0.1:{dead_port()}"
    wrong = one.url("crawler:wrong-password")
    fetcher = loopback_fetcher(**DIRECT, proxies=_expanded([dead, wrong, one.url("crawler:${TEST_PROXY_PASSWORD}")]))
    with caplog.at_level(logging.WARNING, logger="crawl_platform"):
        results = fetcher.fetch_all([hostile.url(f"/page/{k}") for k in range(4)])
    assert all(r.status == 200 for r in results.values())
    # The dead one and the one with the wrong password were each tried once, then benched.
    assert [s.status for s in one.requests] == [407, 200, 200, 200, 200]
    assert fetcher.transport.proxies.healthy() == [fetcher.transport.proxies.proxies[2]]
    assert len([r for r in caplog.records if "benched" in r.getMessage()]) == 2


def test_when_every_proxy_fails_the_url_lands_as_a_failure(hostile, proxies):
    one, _ = proxies
    fetcher = loopback_fetcher(**DIRECT, proxies=_expanded([one.url("crawler:${TEST_PROXY_PASSWORD}x")]))
    result = fetcher.fetch(hostile.url("/page/1"))
    assert result.status is None
    assert result.error == ("ProxyError: all 1 proxies failed, the last with: 407 Proxy Authentication Required "
                            "(gave up after 1 attempt)")
    hostile.settle()
    assert hostile.requests == []


def test_credentials_appear_in_no_log_line_and_no_error(hostile, proxies, caplog):
    one, _ = proxies
    dead = f"http://crawler:{SECRET}@127.0.0.1:{dead_port()}"
    proxy_urls = [dead, one.url(f"crawler:{SECRET}x"), one.url(f"crawler:{SECRET}")]
    fetcher = loopback_fetcher(**DIRECT | {"retry": RetryPolicy(max_attempts=2, backoff_s=0.01)},
                               proxies=_expanded(proxy_urls))
    with caplog.at_level(logging.DEBUG):  # every logger, urllib3's debug lines included
        results = fetcher.fetch_all([hostile.url("/page/1"), f"http://127.0.0.1:{dead_port()}/x"])
    assert results[hostile.url("/page/1")].status == 200
    texts = [caplog.text, *(r.error or "" for r in results.values())]
    assert any("crawler:***@" in t for t in texts)  # the proxy is named, its password is not
    token = base64.b64encode(f"crawler:{SECRET}".encode()).decode()  # the Proxy-Authorization value
    assert not any(SECRET in t or token in t for t in texts)


def test_a_missing_environment_variable_is_a_config_error_without_secrets():
    with pytest.raises(ProxyConfigError) as caught:
        expand_credentials("http://crawler:${NOT_SET_ANYWHERE}@proxy.example:3128", {})
    assert str(caught.value) == ("proxy http://crawler:***@proxy.example:3128: "
                                 "environment variable NOT_SET_ANYWHERE is not set")


def test_redact_scrubs_every_password():
    text = "via http://a:pw1@h1:1 and https://b:pw2@h2/x, not http://h3/ or user@example.com"
    assert redact(text) == "via http://a:***@h1:1 and https://b:***@h2/x, not http://h3/ or user@example.com"


def test_a_proxy_that_is_not_http_is_rejected_up_front():
    with pytest.raises(ProxyConfigError, match=r"socks5://u:\*\*\*@h:1080"):
        ProxyPool(["socks5://u:pw@h:1080"])
