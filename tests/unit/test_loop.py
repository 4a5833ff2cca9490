"""The crawl loop's planners (crawl_platform.pipeline.planning): what runs next, from watermarks, the
cursor and the run queue alone; and the in-process driver (crawl_platform.pipeline.loop) over the
in-memory bus."""

from __future__ import annotations

import json

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import OffsetRange, decode_cursor, encode_cursor
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.pipeline.loop import CrawlLoop
from crawl_platform.pipeline.planning import (
    LoopPolicy,
    QueuedRuns,
    TopicState,
    plan_frontier,
    plan_intake,
    read_topic,
)
from tests.unit.crawl_rows import crawl_loop, crawl_request

POLICY = LoopPolicy(batch_size=100, max_runs_per_tick=16, max_queued_runs=32, batch_groups=2)


def _topic(watermarks: dict[int, tuple[int, int]], cursor: dict[int, int] | None = None, epoch: int = 0,
           recreated: bool = False) -> TopicState:
    return TopicState(watermarks, cursor or {}, epoch, "topic-id", recreated)


def test_batches_span_a_partition_group_and_name_the_partitions_they_read():
    plan = plan_frontier(_topic({0: (0, 150), 1: (0, 0), 2: (0, 30), 3: (0, 10)}), QueuedRuns(), POLICY)
    assert [b.key for b in plan.batches] == ["e0.p0-0-100+p2-0-30", "e0.p3-0-10", "e0.p0-100-150"]
    assert [b.partitions for b in plan.batches] == [[0, 2], [3], [0]]
    assert decode_cursor(plan.cursor) == ({0: 150, 1: 0, 2: 30, 3: 10}, 0)
    assert json.loads(plan.cursor)["topic_id"] == "topic-id"
    assert not plan.requeues
    assert not plan.check_orphans


def test_a_full_run_queue_holds_batches_back_and_keeps_their_offsets_for_later():
    topic = _topic({0: (0, 500)})
    full = plan_frontier(topic, QueuedRuns(waiting=32), POLICY)
    assert full.batches == []
    assert full.backlog == 500
    assert full.skip_reason == "run queue full"
    assert decode_cursor(full.cursor)[0] == {0: 0}
    assert not full.check_orphans  # a backlog is not an orphan
    two_free = plan_frontier(topic, QueuedRuns(waiting=30), POLICY)
    assert [b.key for b in two_free.batches] == ["e0.p0-0-100", "e0.p0-100-200"]
    assert two_free.backlog == 300


def test_a_broker_that_lost_its_log_bumps_the_epoch_and_requeues_pending_urls_once():
    lost = plan_frontier(_topic({0: (0, 5)}, cursor={0: 40}, epoch=3), QueuedRuns(), POLICY)
    assert lost.epoch == 4
    assert [r.key for r in lost.requeues] == ["requeue-e4"]
    assert "frontier partitions [0] lost their log" in lost.requeues[0].reason
    # The new log is planned from its start, under the new epoch, so keys never collide.
    assert [b.key for b in lost.batches] == ["e4.p0-0-5"]
    recreated = plan_frontier(_topic({0: (0, 60)}, epoch=1, recreated=True), QueuedRuns(), POLICY)
    assert recreated.epoch == 2
    assert "created anew" in recreated.requeues[0].reason


def test_orphans_are_looked_for_only_when_nothing_is_planned_queued_or_in_flight():
    idle = plan_frontier(_topic({0: (0, 10)}, cursor={0: 10}), QueuedRuns(), POLICY)
    assert idle.idle
    assert idle.check_orphans
    assert idle.with_orphans(0, now=100.0).requeues == []
    with_orphans = idle.with_orphans(7, now=1234.5)
    assert [r.key for r in with_orphans.requeues] == ["requeue-orphans-1234"]
    assert "7 queued URLs" in with_orphans.requeues[0].reason
    busy = plan_frontier(_topic({0: (0, 10)}, cursor={0: 10}), QueuedRuns(in_flight=1), POLICY)
    assert not busy.check_orphans
    assert busy.with_orphans(7, now=1.0).requeues == []  # a run in flight may still fetch them


def test_seeds_plan_one_intake_run_over_every_partition():
    plan = plan_intake(_topic({0: (0, 2), 1: (0, 0), 2: (0, 1)}), "seeds")
    assert plan.range_keys == ["p0-0-2", "p2-0-1"]
    assert plan.run_key == "seeds-e0-p0-0-2+p2-0-1"
    assert not plan.lost
    nothing = plan_intake(_topic({0: (0, 2)}, cursor={0: 2}), "seeds")
    assert nothing.run_key is None
    lost = plan_intake(_topic({0: (0, 1)}, cursor={0: 9}), "seeds")
    assert lost.lost
    assert lost.run_key == "seeds-e1-p0-0-1"
    control = plan_intake(_topic({0: (0, 2)}), "control")  # the control topic, planned the same way
    assert control.run_key == "control-e0-p0-0-2"


def test_read_topic_does_not_ask_for_held_partitions_but_knows_they_exist():
    bus = InMemoryBus(partitions=3)
    bus.ensure_topics()
    topic = read_topic(bus, bus.frontier_topic, None, held={1})
    assert topic.watermarks == {0: (0, 0), 2: (0, 0)}  # a continuing run reads partition 1 itself
    assert topic.partition_ids == (0, 1, 2)
    assert read_topic(bus, bus.frontier_topic, None).partition_ids == (0, 1, 2)


def test_read_topic_creates_missing_topics_and_notices_a_recreated_one():
    bus = InMemoryBus(partitions=2)
    first = read_topic(bus, bus.frontier_topic, None)  # the topic did not exist yet
    assert first.watermarks == {0: (0, 0), 1: (0, 0)}
    assert not first.recreated
    assert all(publish_frontier(bus, [FrontierURL("c", "http://a.example/", 0)]))
    cursor = encode_cursor({0: 1, 1: 1}, 0, first.topic_id)
    assert not read_topic(bus, bus.frontier_topic, cursor).recreated
    bus.restart_empty()
    again = read_topic(bus, bus.frontier_topic, cursor)
    assert again.recreated
    assert again.cursor == {}  # the cursor starts over from the new log


def test_the_loop_crawls_a_site_over_the_in_memory_bus(settings, store):
    """The same loop the sensors follow, over the in-memory bus: no broker involved at all."""
    bus = InMemoryBus(settings.seeds_topic, settings.frontier_topic, settings.dead_letter_topic, partitions=4)
    bus.ensure_topics()
    with DemoSite(n_pages=40, seed=3).serve() as server:
        loop: CrawlLoop = crawl_loop(settings, bus, store)
        loop.crawler.frontier.register(crawl_request("mem", server.base_url + "/", max_pages=1000, max_depth=50))
        report = loop.run_until_idle()
        expected = server.site.expected_urls(server.base_url)
    landed = [row[0] for row in store.query("SELECT url FROM pages WHERE crawl_id = 'mem'")]
    assert sorted(landed) == sorted(expected)
    assert loop.crawler.frontier.status("mem")[0].pending == 0
    assert sum(b.fetched + b.failed for b in report.batches) == len(expected)  # /missing is a 404
    assert report.turns >= 2


def test_every_frontier_message_of_the_loop_is_read_by_exactly_one_batch(settings, store):
    bus = InMemoryBus(settings.seeds_topic, settings.frontier_topic, settings.dead_letter_topic, partitions=3)
    bus.ensure_topics()
    urls = [FrontierURL("c", f"http://h{i % 5}.example/{i}", 0) for i in range(40)]
    assert all(publish_frontier(bus, urls))
    seen: list[OffsetRange] = []
    topic = read_topic(bus, bus.frontier_topic, None)
    plan = plan_frontier(topic, QueuedRuns(), LoopPolicy(batch_size=4, max_runs_per_tick=3, batch_groups=0))
    while plan.batches:
        seen += [r for b in plan.batches for r in b.ranges]
        plan = plan_frontier(read_topic(bus, bus.frontier_topic, plan.cursor), QueuedRuns(),
                             LoopPolicy(batch_size=4, max_runs_per_tick=3, batch_groups=0))
    offsets = sorted((r.partition, o) for r in seen for o in range(r.start, r.end))
    assert offsets == sorted((p, o) for p, (_lo, hi) in bus.watermarks(bus.frontier_topic).items()
                             for o in range(hi))
