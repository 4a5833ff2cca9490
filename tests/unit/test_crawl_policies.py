"""Per-crawl politeness and priority: a crawl's own host delay and concurrency in the fetcher (clamped
to the operator's limits, the most polite crawl winning a shared host, robots.txt Crawl-delay and
back-off on top), and higher-priority crawls' batches first."""

from __future__ import annotations

from itertools import pairwise

import pytest

from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.fetch.politeness import HostPacer
from crawl_platform.fetch.retry import RetryPolicy
from crawl_platform.pipeline.planning import LoopPolicy, QueuedRuns, TopicState, plan_frontier
from tests.sites.hostile import Reply
from tests.unit.conftest import loopback_fetcher
from tests.unit.crawl_rows import crawl_loop

PACING = {"allowed_networks": ["127.0.0.0/8"], "obey_robots": False, "retry": RetryPolicy(max_attempts=1)}
PATHS = ["/page/1", "/page/2", "/page/3", "/page/4"]


def _gaps(site, paths):
    site.settle()
    starts = {s.path: s.started_at for s in site.requests}
    return [starts[b] - starts[a] for a, b in pairwise(paths)]


def _max_in_flight(site) -> int:
    site.settle()
    events = sorted([(s.started_at, 1) for s in site.requests] + [(s.finished_at, -1) for s in site.requests])
    now = peak = 0
    for _t, step in events:
        now += step
        peak = max(peak, now)
    return peak


@pytest.mark.timing
def test_a_crawls_own_delay_spaces_its_requests(hostile):
    loopback_fetcher(**PACING).fetch_all([FetchRequest(hostile.url(p), host_delay_s=0.3) for p in PATHS])
    assert all(0.29 <= g < 0.5 for g in _gaps(hostile, PATHS)), _gaps(hostile, PATHS)


@pytest.mark.timing
def test_a_delay_below_the_floor_is_raised_and_a_shared_host_takes_the_most_polite_crawl(hostile):
    fetcher = loopback_fetcher(**PACING, min_host_delay_s=0.25)
    fetcher.fetch_all([FetchRequest(hostile.url(p), host_delay_s=0.01) for p in PATHS])
    assert all(0.24 <= g < 0.45 for g in _gaps(hostile, PATHS))
    hostile.clear_requests()
    other = ["/page/5", "/page/6", "/page/7", "/page/8"]
    fetcher.fetch_all([FetchRequest(hostile.url(p), host_delay_s=0.4 if p == "/page/8" else 0.25) for p in other])
    assert all(0.39 <= g < 0.6 for g in _gaps(hostile, other)), _gaps(hostile, other)


@pytest.mark.timing
def test_robots_crawl_delay_wins_over_a_shorter_crawl_delay(hostile):
    hostile.robots = Reply(200, b"User-agent: *\nCrawl-delay: 0.4\n")
    loopback_fetcher(**PACING | {"obey_robots": True}).fetch_all(
        [FetchRequest(hostile.url(p), host_delay_s=0.1) for p in PATHS])
    assert all(0.39 <= g < 0.6 for g in _gaps(hostile, PATHS)), _gaps(hostile, PATHS)


def test_back_off_wins_over_a_crawls_own_delay_and_decays_back_to_it():
    pacer = HostPacer(base_delay_s=0.0, throttle_delay_s=0.5, decay=0.5)
    pacer.set_policy("http://h", 0.1, 1)
    pacer.observe("http://h", 0.01, 503)
    assert pacer.delay_s("http://h") == 0.5  # the back-off, above the crawl's 0.1 s
    pacer.observe("http://h", 0.01, 200)
    pacer.observe("http://h", 0.01, 200)
    pacer.observe("http://h", 0.01, 200)
    assert pacer.delay_s("http://h") == 0.1  # healthy again: back to the crawl's own gap, not the pacer's 0


@pytest.mark.timing
def test_a_crawls_concurrency_is_capped_by_the_platform(hostile):
    urls = [hostile.url(f"/slow?ms=200&n={i}") for i in range(8)]
    loopback_fetcher(**PACING, max_host_concurrency=2).fetch_all(
        [FetchRequest(u, host_delay_s=0.0, host_concurrency=6) for u in urls])
    assert _max_in_flight(hostile) == 2


@pytest.mark.timing
def test_a_crawls_delay_is_what_the_server_sees_through_the_crawl_loop(settings, bus, store):
    with DemoSite(n_pages=6, seed=1).serve() as server:
        loop = crawl_loop(settings, bus, store)
        loop.crawler.frontier.register(CrawlRequest("slow-crawl", (server.base_url + "/",), 100, 5, "host",
                                                    0.0, host_delay_ms=150))
        loop.run_until_idle()
        starts = sorted(r.started_at for r in server.requests)
        ends = sorted(r.finished_at for r in server.requests)
    assert len(starts) >= 5
    assert all(b - a >= 0.149 for a, b in zip(ends, starts[1:], strict=False)), (starts, ends)


def test_higher_priority_partitions_are_cut_first_when_the_queue_has_room_for_one():
    topic = TopicState({0: (0, 10), 1: (0, 10), 2: (0, 10)}, {}, 0, "id")
    policy = LoopPolicy(batch_size=100, max_runs_per_tick=16, max_queued_runs=32, batch_groups=0)
    plain = plan_frontier(topic, QueuedRuns(waiting=31), policy)
    ranked = plan_frontier(topic, QueuedRuns(waiting=31), policy, {2: 5, 1: 1})
    assert [b.partitions for b in plain.batches] == [[0]]
    assert [(b.partitions, b.priority) for b in ranked.batches] == [([2], 5)]
    every = plan_frontier(topic, QueuedRuns(), policy, {2: 5, 1: 1})
    assert [(b.partitions, b.priority) for b in every.batches] == [([2], 5), ([1], 1), ([0], 0)]


def test_the_broker_puts_a_key_where_partition_of_says(bus):
    hosts = [f"host-{i}.example:{8000 + i}" for i in range(24)]
    assert all(publish_frontier(bus, [FrontierURL("c", f"http://{h}/", 0) for h in hosts]))
    seen = {}
    for part, (lo, hi) in bus.watermarks(bus.frontier_topic).items():
        if hi > lo:
            seen.update({r.key.decode(): part for r in bus.read_range(bus.frontier_topic, OffsetRange(part, lo, hi))})
    assert seen == {h: bus.partition_of(h.encode(), bus.partitions) for h in hosts}
    assert len(set(seen.values())) > 1


def test_two_crawls_compete_and_the_higher_priority_one_is_fetched_first(settings, bus, store):
    sites = [DemoSite(n_pages=5, seed=s).serve() for s in range(6)]
    try:
        by_partition = {}
        for server in sites:
            host = server.base_url.split("//")[1]
            by_partition.setdefault(bus.partition_of(host.encode(), bus.partitions), server)
        low_site, high_site = list(by_partition.values())[:2]
        loop = crawl_loop(settings, bus, store, batch_size=100)
        loop.coordinator.policy = LoopPolicy(batch_size=100, max_runs_per_tick=1, batch_groups=0)
        frontier = loop.crawler.frontier
        frontier.register(CrawlRequest("low", (low_site.base_url + "/",), 100, 0, "host", 0.0))
        frontier.register(CrawlRequest("high", (high_site.base_url + "/",), 100, 0, "host", 0.0, priority=3))
        report = loop.run_until_idle()
    finally:
        for server in sites:
            server.close()
    order = [store.query("SELECT DISTINCT crawl_id FROM batch_items WHERE batch_id = ?", [b.batch_id])[0][0]
             for b in report.batches]
    assert order == ["high", "low"]
