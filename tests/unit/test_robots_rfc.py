"""robots.txt per RFC 9309 (crawl_platform.fetch.robots through crawl_platform.fetch.fetcher), against a real
server: what a fetch outcome means, redirects, the size limit, matching, the group that applies
to our user agent, and the cache shared across runs through the ``hosts`` table."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.fetch.robots import robots_token
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.hosts import HostRecord, load_hosts
from crawl_platform.store.location import LakeLocation
from tests.sites.hostile import HostileSite, Reply, hang_up
from tests.unit.conftest import AGENT, UNREACHABLE, loopback_fetcher

# Our User-Agent with a comment, as crawlers send it: a word in the comment is no product token.
AGENT_WITH_COMMENT = f"{AGENT} (+https://github.com/example/crawl-platform-test)"


def _fetched(site: HostileSite, paths: list[str]) -> set[str]:
    """The paths a new fetcher was allowed to request (and the server saw)."""
    results = loopback_fetcher(AGENT_WITH_COMMENT).fetch_all([site.url(p) for p in paths])
    site.settle()
    allowed = {p for p in paths if not results[site.url(p)].disallowed}
    assert allowed == {p for p in paths if site.request_count(p) == 1}
    return allowed


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_a_4xx_robots_txt_allows_everything(hostile, status):
    hostile.robots = Reply(status, b"User-agent: *\nDisallow: /\n")  # a body that must be ignored
    assert _fetched(hostile, ["/page/1", "/page/2"]) == {"/page/1", "/page/2"}


def test_a_5xx_robots_txt_disallows_everything_until_it_is_fetched_again(hostile):
    hostile.robots = Reply(503, b"busy")
    fetcher = loopback_fetcher(AGENT_WITH_COMMENT, robots_error_ttl_s=0.3)
    first = fetcher.fetch(hostile.url("/page/1"))
    # Not requested, and a failure of the host (it lands as a row), not a robots.txt rule.
    assert (first.status, first.disallowed) == (None, False)
    assert first.error == UNREACHABLE
    hostile.robots = Reply(200, b"User-agent: *\nDisallow: /private\n")
    assert fetcher.fetch(hostile.url("/page/2")).error == UNREACHABLE  # the short error entry still holds
    time.sleep(0.35)
    assert fetcher.fetch(hostile.url("/page/3")).status == 200  # fetched again: now it answers
    hostile.settle()
    assert hostile.request_count("/robots.txt") == 2
    assert (hostile.request_count("/page/1"), hostile.request_count("/page/2")) == (0, 0)


def test_a_network_error_on_robots_txt_disallows_everything(hostile):
    hostile.routes["/robots.txt"] = hang_up
    result = loopback_fetcher(AGENT_WITH_COMMENT).fetch(hostile.url("/page/1"))
    assert (result.status, result.error) == (None, UNREACHABLE)
    hostile.settle()
    assert hostile.request_count("/page/1") == 0


def _robots_behind_redirects(site: HostileSite, hops: int) -> None:
    site.routes.pop("/robots.txt", None)
    site.static["/robots.txt"] = Reply(301, b"", {"Location": "/r/1"})
    for k in range(1, hops):
        site.static[f"/r/{k}"] = Reply(301, b"", {"Location": f"/r/{k + 1}"})
    site.static[f"/r/{hops}"] = Reply(200, b"User-agent: *\nDisallow: /secret\n", {"Content-Type": "text/plain"})


def test_robots_txt_redirects_are_followed_up_to_five(hostile):
    _robots_behind_redirects(hostile, 5)  # robots.txt -> /r/1 -> ... -> /r/5: five redirects
    assert _fetched(hostile, ["/secret", "/page/1"]) == {"/page/1"}


def test_more_than_five_robots_redirects_count_as_no_robots_txt(hostile):
    _robots_behind_redirects(hostile, 6)
    assert _fetched(hostile, ["/secret", "/page/1"]) == {"/secret", "/page/1"}
    assert hostile.request_count("/r/6") == 0


def test_rules_up_to_500_kib_are_honoured_and_a_huge_file_is_not_an_error(hostile):
    filler = b"#" + b"x" * 1022 + b"\n"  # 1 KiB
    big = b"User-agent: *\n" + filler * 499 + b"Disallow: /late\n"  # the rule ends just under 500 KiB
    assert 499 * 1024 < len(big) <= 500 * 1024
    hostile.robots = Reply(200, big)
    assert _fetched(hostile, ["/late", "/page/1"]) == {"/page/1"}

    with HostileSite() as huge:  # 8 MiB: read up to the limit, not whole, and not a failure
        huge.robots = Reply(200, b"User-agent: *\nDisallow: /early\n" + filler * 8192 + b"Disallow: /page/\n")
        assert _fetched(huge, ["/early", "/page/1"]) == {"/page/1"}


def test_longest_match_wildcards_and_end_anchors(hostile):
    hostile.robots = Reply(200, b"\n".join([
        b"User-agent: *",
        b"Disallow: /p",
        b"Allow: /p/public",  # longer than /p: wins for /p/public...
        b"Disallow: /*.pdf$",  # ...files ending in .pdf, not .pdf?query
        b"Disallow: /exact$",  # /exact but not /exact/more
        b"Disallow: /*/tmp/",
    ]))
    paths = ["/p/secret", "/page/1", "/p/public/a", "/doc.pdf", "/doc.pdf?v=2", "/exact", "/exact/more",
             "/a/tmp/b", "/other"]
    assert _fetched(hostile, paths) == {"/p/public/a", "/doc.pdf?v=2", "/exact/more", "/other"}


def test_our_product_tokens_group_wins_over_the_star_group(hostile):
    hostile.robots = Reply(200, b"\n".join([
        b"User-agent: *",
        b"Disallow: /",
        b"",
        b"User-agent: github",  # a word in our UA's comment: must not be taken for our group
        b"Disallow: /page/2",
        b"",
        b"User-agent: Crawl-Platform-Test",  # ours, matched case-insensitively
        b"Disallow: /page/3",
    ]))
    assert robots_token(AGENT_WITH_COMMENT) == "crawl-platform-test"
    assert _fetched(hostile, ["/page/1", "/page/2", "/page/3"]) == {"/page/1", "/page/2"}
    # A crawl with its own User-Agent falls under the * group here.
    other = loopback_fetcher(AGENT_WITH_COMMENT).fetch(FetchRequest(hostile.url("/page/4"),
                                                                    user_agent="OtherBot/2.0"))
    assert other.disallowed


def test_robots_txt_is_cached_in_the_hosts_table_and_shared_across_runs(hostile, tmp_path):
    store = CrawlStore(LakeLocation.from_settings(Settings(lake_path=tmp_path / "lake")))
    origin = origin_of(hostile.base_url)
    hostile.robots = Reply(200, b"User-agent: *\nDisallow: /private\n")
    first = loopback_fetcher(AGENT_WITH_COMMENT)
    assert first.fetch(hostile.url("/page/1")).status == 200
    land_batch(store, "b1", [], {}, {}, first.host_records())
    assert store.query("SELECT origin, robots_status, robots_body FROM hosts") == [
        (origin, 200, "User-agent: *\nDisallow: /private\n")]

    second = loopback_fetcher(AGENT_WITH_COMMENT)  # another run: primed from the table, not asking the server
    with store.read() as con:
        second.prime(load_hosts(con, [origin]).values())
    assert second.fetch(hostile.url("/private/x")).disallowed
    assert second.fetch(hostile.url("/page/2")).status == 200
    hostile.settle()
    assert hostile.request_count("/robots.txt") == 1


def test_a_cached_robots_txt_older_than_a_day_is_fetched_again(hostile):
    origin = origin_of(hostile.base_url)
    stale = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=24, minutes=1)
    fetcher = loopback_fetcher(AGENT_WITH_COMMENT)
    fetcher.prime([HostRecord(origin, 200, "User-agent: *\nDisallow: /\n", stale)])
    assert fetcher.fetch(hostile.url("/page/1")).status == 200  # the stale "Disallow: /" is gone
    hostile.settle()
    assert hostile.request_count("/robots.txt") == 1


def test_a_cached_server_error_expires_quickly(hostile):
    origin = origin_of(hostile.base_url)
    recent = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=6)
    fetcher = loopback_fetcher(AGENT_WITH_COMMENT)  # error entries live 5 minutes by default
    fetcher.prime([HostRecord(origin, 503, "", recent)])
    assert fetcher.fetch(hostile.url("/page/1")).status == 200
