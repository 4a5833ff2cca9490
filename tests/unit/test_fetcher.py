"""The polite fetcher (crawl_platform.fetch.fetcher) against the demo site served on loopback."""

from __future__ import annotations

import json
import time
from itertools import pairwise

import pytest

from crawl_platform.bus.broker import free_port
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.retry import RetryPolicy
from tests.unit.conftest import AGENT, UNREACHABLE, connection_refused, loopback_fetcher

# The demo site answers on 127.0.0.1 (its off-site links on 127.0.0.2); failures are retried quickly.
DEMO = {"allowed_networks": ["127.0.0.0/8"], "retry": RetryPolicy(backoff_s=0.01)}
BLOCKED = "blocked address: 127.0.0.1, a loopback address"


def _served(site, total: int) -> None:
    """Wait for the server to record ``total`` requests: it records each just after answering it."""
    deadline = time.monotonic() + 2.0
    while len(site.requests) < total and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.02)  # and catch any request beyond those


def test_page_is_fetched_with_status_body_and_content_type(site):
    result = loopback_fetcher(**DEMO).fetch(site.base_url + "/page/1")
    assert result.status == 200
    assert result.error is None
    assert not result.disallowed
    assert result.final_url == site.base_url + "/page/1"
    assert result.content_type == "text/html; charset=utf-8"
    assert result.body == site.site.body("/page/1")
    assert result.is_html
    assert result.elapsed_ms > 0


def test_missing_page_lands_as_404(site):
    result = loopback_fetcher(**DEMO).fetch(site.base_url + "/missing")
    assert result.status == 404
    assert result.error is None
    assert not result.disallowed
    _served(site, 2)
    assert site.request_count("/missing") == 1


def test_redirect_is_followed_to_its_final_url(site):
    result = loopback_fetcher(**DEMO).fetch(site.base_url + "/old-home")
    assert result.url == site.base_url + "/old-home"
    assert result.final_url == site.base_url + "/page/1"
    assert result.status == 200
    assert result.body == site.site.body("/page/1")
    _served(site, 3)
    assert site.request_count("/old-home") == 1
    assert site.request_count("/page/1") == 1


def test_too_many_redirects_is_an_error(site):
    result = loopback_fetcher(**DEMO, max_redirects=0).fetch(site.base_url + "/old-home")
    assert result.status is None
    assert result.error == "more than 0 redirects"
    _served(site, 2)
    assert site.request_count("/page/1") == 0


def test_robots_disallowed_page_is_never_requested(site):
    result = loopback_fetcher(**DEMO).fetch(site.base_url + "/private/0")
    assert result.disallowed
    assert result.status is None
    assert result.error == "disallowed by robots.txt"
    _served(site, 1)
    assert site.request_count("/private/0") == 0
    assert site.request_count("/robots.txt") == 1


def test_robots_txt_is_fetched_once_per_host(site):
    fetcher = loopback_fetcher(**DEMO)
    fetcher.fetch_all([site.base_url + p for p in ("/", "/page/1", "/page/2", "/private/1", "/missing")])
    _served(site, 5)
    assert site.request_count("/robots.txt") == 1


def test_obey_robots_off_fetches_disallowed_pages(site):
    result = loopback_fetcher(**DEMO, obey_robots=False).fetch(site.base_url + "/private/0")
    assert result.status == 200
    assert not result.disallowed
    _served(site, 1)
    assert site.request_count("/robots.txt") == 0


def test_non_html_content_type_is_recorded_but_its_body_not_read(site):
    result = loopback_fetcher(**DEMO).fetch(site.base_url + "/data.json")
    assert result.status == 200
    assert result.content_type == "application/json"
    assert result.body == b""
    assert not result.is_html
    # With JSON on the content-type allow-list the body is read, and still not taken for HTML.
    widened = loopback_fetcher(**DEMO, content_types=["text/html", "application/json"])
    allowed = widened.fetch(site.base_url + "/data.json")
    assert json.loads(allowed.body)["pages"] == 120
    assert not allowed.is_html


def test_connection_refused_is_a_result_not_an_exception():
    port = free_port()
    url = f"http://127.0.0.1:{port}/page"
    result = loopback_fetcher(**DEMO).fetch(url)
    assert result.status is None
    assert result.error == UNREACHABLE  # robots.txt is asked first, and that fails
    assert not result.disallowed
    assert result.body == b""
    # Without robots in the way the error says what happened.
    direct = loopback_fetcher(**DEMO, obey_robots=False).fetch(url)
    assert direct.status is None
    assert connection_refused(port, 3).fullmatch(direct.error or ""), direct.error
    assert not direct.disallowed


def test_network_guard_refuses_loopback_without_a_request(site):
    result = Fetcher(AGENT, host_delay_s=0.0, obey_robots=False).fetch(site.base_url + "/page/1")
    assert result.status is None
    assert result.error == BLOCKED
    _served(site, 0)
    assert site.requests == []


def test_network_guard_by_default_refuses_loopback_without_a_request(site):
    # Defaults: the network guard and robots.txt are both on.
    result = Fetcher(AGENT, host_delay_s=0.0).fetch(site.base_url + "/page/1")
    assert result.status is None
    assert result.error == BLOCKED
    _served(site, 0)
    assert site.requests == []  # not even robots.txt


def test_network_guard_reports_the_blocked_address_not_robots(site):
    result = Fetcher(AGENT, host_delay_s=0.0).fetch(site.base_url + "/page/1")
    assert result.error == BLOCKED
    assert not result.disallowed


@pytest.mark.timing  # wall-clock gaps between requests: `make test` runs it alone
def test_host_delay_spaces_requests_to_one_host(site):
    fetcher = loopback_fetcher(**DEMO, host_delay_s=0.2)
    urls = [site.base_url + p for p in ("/page/1", "/page/2", "/page/3", "/page/4")]
    results = fetcher.fetch_all(urls)
    assert sorted(results) == sorted(urls)
    assert all(r.status == 200 for r in results.values())
    _served(site, 5)
    starts = sorted(r.started_at for r in site.requests)
    assert len(starts) == 5  # robots.txt and the four pages
    gaps = [b - a for a, b in pairwise(starts)]
    assert min(gaps) >= 0.19, gaps


def test_fetch_all_collapses_duplicates(site):
    url = site.base_url + "/page/5"
    results = loopback_fetcher(**DEMO).fetch_all([url, url, url])
    assert list(results) == [url]
    _served(site, 2)
    assert site.request_count("/page/5") == 1


def test_body_larger_than_the_cap_is_an_error(site):
    result = loopback_fetcher(**DEMO, max_body_bytes=100).fetch(site.base_url + "/page/3")
    assert result.status is None
    assert result.body == b""
    assert result.error == f"body larger than 100 bytes (Content-Length {len(site.site.body('/page/3'))})"
    # A body within the cap is unaffected.
    fits = loopback_fetcher(**DEMO, max_body_bytes=len(site.site.body("/page/3"))).fetch(site.base_url + "/page/3")
    assert fits.status == 200
