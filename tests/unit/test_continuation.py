"""A batch run going on to its partitions' next batches (crawl_platform.pipeline.continuation, cut by
crawl_platform.pipeline.coordinator), against the real broker, a lake and a demo site; and the loop
rules that make it safe (held partitions, the cursor moved past what landed)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import pairwise

from crawl_platform.bus.offsets import batch_key, decode_cursor, parse_batch_key, plan_batches
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.continuation import Continuation, continue_batches
from crawl_platform.pipeline.coordinator import CrawlCoordinator
from crawl_platform.pipeline.planning import LoopPolicy, QueuedRuns, TopicState, advance_to_landed, plan_frontier
from tests.unit.crawl_rows import crawl_request

POLICY = LoopPolicy(batch_size=100, max_runs_per_tick=16, max_queued_runs=32, batch_groups=2)


def _continuation(crawler: BatchCrawler, batch_size: int) -> Continuation:
    """A continuation whose coordinator cuts next batches of ``batch_size`` messages a partition."""
    return Continuation(crawler, CrawlCoordinator(crawler.bus, crawler.store, LoopPolicy(batch_size)))


class _Recorded:
    """A partition registry that records each key added, in order with the test's own events."""

    def __init__(self, order: list[tuple[str, str]]) -> None:
        self.order = order

    def add_partitions(self, keys) -> None:
        self.order += [("read", key) for key in keys]


def _first_batch(settings, bus, store, seed: str, crawl_id: str) -> tuple[BatchCrawler, str]:
    """A crawl registered and its seed batch fetched, landed and expanded, as a batch run's steps do."""
    crawler = BatchCrawler(bus, store, Fetcher(settings.user_agent, host_delay_s=0.0,
                                               allowed_networks=["127.0.0.0/8"]), "lxml")
    crawler.frontier.register(crawl_request(crawl_id, seed, max_pages=1000, max_depth=50))
    (ranges,) = plan_batches(bus.watermarks(bus.frontier_topic), {}, batch_size=1000, max_batches=1).batches
    key = batch_key(0, ranges)
    crawler.fetch_and_land(key, ranges, refetch_done=False)
    crawler.expand(key)
    return crawler, key


def test_a_run_goes_on_batch_by_batch_until_its_partitions_hold_nothing_new(settings, bus, store):
    with DemoSite(n_pages=40, seed=3).serve() as server:
        crawler, key = _first_batch(settings, bus, store, server.base_url + "/", "go-on")
        continuation = _continuation(crawler, 15)
        order: list[tuple[str, str]] = []
        done = []
        for batch in continue_batches(continuation, key, seconds=60, partitions=_Recorded(order)):
            order.append(("landed", batch.batch.key))
            done.append(batch)
        expected = server.site.expected_urls(server.base_url)
        requests = Counter(r.path for r in server.requests)
    # Every page landed once, by the seed batch or one of the batches the run went on to.
    landed = [url for (url,) in store.query("SELECT url FROM pages WHERE crawl_id = 'go-on'")]
    assert sorted(landed) == sorted(expected)
    assert crawler.frontier.status("go-on")[0].pending == 0
    # Each path once; /page/1 also as the demo site's 301 target, and robots.txt per fetcher.
    assert {p: n for p, n in requests.items() if n != 1 and p != "/robots.txt"} == {"/page/1": 2}
    # Each batch starts where the one before ended, on the seed batch's partition, at most 15 long.
    (seed_range,) = parse_batch_key(key)[1]
    ends = [seed_range.end]
    for batch in done:
        (r,) = batch.batch.ranges
        assert (r.partition, r.start) == (seed_range.partition, ends[-1])
        assert r.end - r.start <= 15
        assert batch.report.messages == r.end - r.start
        ends.append(r.end)
    assert len(done) >= 3
    # With a backlog waiting (the home page links more than 15 pages), the next batch is read and
    # fetched while the one before lands: its read comes before that landing.
    keys = [d.batch.key for d in done]
    assert any(order.index(("read", nxt)) < order.index(("landed", prev)) for prev, nxt in pairwise(keys))
    assert sum(d.report.fetched + d.report.failed for d in done) == len(expected) - 1
    # The lake holds every landed batch's ranges, and nothing is left after the last batch.
    assert continuation.coordinator.landed_ends(0) == {seed_range.partition: ends[-1]}
    assert store.query("SELECT count(DISTINCT batch_id) FROM batch_ranges")[0][0] == len(done) + 1
    assert continuation.coordinator.next_batch_after(key) is None


def test_a_retried_run_goes_on_after_the_last_batch_that_landed(settings, bus, store):
    with DemoSite(n_pages=40, seed=4).serve() as server:
        crawler, key = _first_batch(settings, bus, store, server.base_url + "/", "retry")
        continuation = _continuation(crawler, 10)
        first = continuation.coordinator.next_batch_after(key)
        assert first is not None
        continuation.run(first)  # then the run died
        again = _continuation(crawler, 10).coordinator.next_batch_after(key)
    assert again is not None
    assert again.ranges[0].start == first.ranges[0].end


def test_a_batch_started_runs_to_its_end_and_none_starts_after_the_deadline(settings, bus, store):
    with DemoSite(n_pages=40, seed=5).serve() as server:
        crawler, key = _first_batch(settings, bus, store, server.base_url + "/", "deadline")
        continuation = _continuation(crawler, 10)
        assert list(continue_batches(continuation, key, seconds=0)) == []
        ticks = iter([0.0, 0.0])  # the start and the first batch's; later, the deadline has passed
        done = list(continue_batches(continuation, key, seconds=10, clock=lambda: next(ticks, 99.0)))
    assert len(done) == 1
    assert done[0].report.messages > 0


def test_the_sensor_cuts_nothing_from_partitions_a_run_holds_and_keeps_their_cursor():
    topic = TopicState({0: (0, 150), 1: (0, 40), 2: (0, 30), 3: (0, 10)}, {0: 100}, 0, "topic-id")
    plan = plan_frontier(topic, QueuedRuns(in_flight=1), POLICY, held={0, 3})
    assert [b.key for b in plan.batches] == ["e0.p2-0-30", "e0.p1-0-40"]
    assert plan.backlog == 0
    assert not plan.check_orphans  # a run is in flight


def test_a_run_that_ends_while_the_sensor_reads_the_topic_leaves_no_orphans():
    # The sensor asks which partitions runs hold, reads the topic, then counts the runs in flight;
    # the run holding partition 0 ended in between, so the count finds none. Its partition's
    # backlog is still behind the cursor, for the next pass to cut: requeueing every queued URL
    # then would publish each of them twice.
    topic = TopicState({0: (0, 900_000)}, {0: 300_000}, 0, "topic-id")
    plan = plan_frontier(topic, QueuedRuns(in_flight=0), POLICY, held={0}, continuing=True)
    assert plan.batches == []
    assert plan.backlog == 0
    assert not plan.check_orphans
    assert plan.with_orphans(600_000, now=1.0).requeues == []
    next_pass = plan_frontier(replace(topic, cursor=decode_cursor(plan.cursor)[0]), QueuedRuns(), POLICY,
                              continuing=True)
    assert [b.key for b in next_pass.batches] == ["e0.p0-300000-300100"]


def test_the_cursor_moves_past_what_continuing_runs_landed_unless_the_topic_is_new():
    topic = TopicState({0: (0, 150), 1: (0, 40)}, {0: 100, 1: 40}, 0, "topic-id")
    moved = advance_to_landed(topic, {0: 140, 1: 20, 2: 5})
    assert moved.cursor == {0: 140, 1: 40, 2: 5}
    plan = plan_frontier(moved, QueuedRuns(), POLICY)
    assert [b.key for b in plan.batches] == ["e0.p0-140-150"]
    recreated = TopicState({0: (0, 3)}, {}, 0, "new-id", recreated=True)
    assert advance_to_landed(recreated, {0: 140}).cursor == {}


def test_with_continuing_runs_the_sensor_cuts_one_batch_per_partition_group_and_leaves_the_rest():
    # A backlog of three batches on partition 0: its run goes on through all of it, so a second
    # and a third run would queue behind it and find their offsets landed.
    topic = TopicState({0: (0, 3 * POLICY.batch_size), 1: (0, 10)}, {}, 0, "topic-id")
    plan = plan_frontier(topic, QueuedRuns(), POLICY, continuing=True)
    assert [b.key for b in plan.batches] == [f"e0.p0-0-{POLICY.batch_size}", "e0.p1-0-10"]
    assert plan.backlog == 2 * POLICY.batch_size  # left on the topic for the run to go on with
    assert len(plan_frontier(topic, QueuedRuns(), POLICY).batches) == 4  # without: every batch at once
