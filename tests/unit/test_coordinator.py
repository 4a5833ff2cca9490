"""The crawl coordinator (crawl_platform.pipeline.coordinator) over the in-memory bus and a real lake:
the rules every driver shares (batch size, the idle sweep, the cursor moved past what landed), and
what it asks of the orchestrator's run queue and partitions."""

from __future__ import annotations

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import OffsetRange, batch_key, cursor_number, decode_cursor
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.coordinator import IDLE_SWEEP_EVERY_S, SWEPT_AT, CrawlCoordinator
from crawl_platform.pipeline.planning import LoopPolicy, QueuedRuns
from tests.unit.crawl_rows import crawl_request, land

POLICY = LoopPolicy(batch_size=100, max_runs_per_tick=16, max_queued_runs=32, batch_groups=0)


def _bus(settings, partitions: int = 3) -> InMemoryBus:
    bus = InMemoryBus(settings.seeds_topic, settings.frontier_topic, settings.dead_letter_topic, partitions=partitions)
    bus.ensure_topics()
    return bus


class _Queue:
    """A run queue that answers as told and records what it was asked."""

    def __init__(self, refuse: str | None = None, waiting: int = 0) -> None:
        self.refuse = refuse
        self.waiting = waiting
        self.asked: list[str] = []

    def held_partitions(self) -> frozenset[int]:
        self.asked.append("held")
        return frozenset()

    def unlimited_partitions(self, partitions) -> str | None:
        self.asked.append("unlimited")
        return self.refuse

    def counts(self) -> QueuedRuns:
        self.asked.append("counts")
        return QueuedRuns(self.waiting)


class _Partitions:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def add_partitions(self, keys) -> None:
        self.keys += keys


def test_a_lost_cursor_starts_after_what_landed_not_from_the_start_of_the_log(settings, store):
    bus = _bus(settings)
    assert all(publish_frontier(bus, [FrontierURL("c", f"http://a.example/{i}", 0) for i in range(30)]))
    (partition,) = [p for p, (_lo, hi) in bus.watermarks(bus.frontier_topic).items() if hi]
    land(store, batch_key(0, OffsetRange(partition, 0, 20)), [], [])  # a batch of the first 20 landed
    plan = CrawlCoordinator(bus, store, POLICY).frontier_turn(None).plan
    assert plan is not None
    assert [b.key for b in plan.batches] == [batch_key(0, OffsetRange(partition, 20, 30))]
    assert decode_cursor(plan.cursor)[0][partition] == 30


def test_every_batch_cut_is_added_as_a_partition_and_a_refusing_queue_gets_no_plan(settings, store):
    bus = _bus(settings)
    assert all(publish_frontier(bus, [FrontierURL("c", f"http://h{i}.example/", 0) for i in range(12)]))
    coordinator = CrawlCoordinator(bus, store, POLICY)
    refusing = _Queue(refuse="partition 2 has no one-run-at-a-time limit")
    refused = coordinator.frontier_turn(None, refusing, _Partitions())
    assert (refused.plan, refused.refused) == (None, "partition 2 has no one-run-at-a-time limit")
    assert refusing.asked == ["unlimited"]  # nothing more asked, nothing planned
    queue, partitions = _Queue(waiting=3), _Partitions()
    turn = coordinator.frontier_turn(None, queue, partitions)
    assert turn.plan is not None
    assert partitions.keys == [b.key for b in turn.plan.batches] != []
    assert turn.queue == QueuedRuns(3)
    assert queue.asked == ["unlimited", "counts"]  # held partitions only for continuing runs


def test_the_automatic_batch_size_follows_the_hosts_queued(settings, store):
    bus = _bus(settings)
    Frontier(store, bus).register(crawl_request("c", *(f"http://h{i}.example/" for i in range(6))))
    sized: list[float] = []

    def auto(hosts_per_partition: float) -> int:
        sized.append(hosts_per_partition)
        return 123

    coordinator = CrawlCoordinator(bus, store, POLICY, auto_batch_size=auto)
    assert coordinator.batch_size() == 123
    assert coordinator.batch_size(cutting=False) == 123  # nothing to cut: the lake is not asked
    assert sized == [6 / 3, 0.0]
    assert CrawlCoordinator(bus, store, POLICY).batch_size() == POLICY.batch_size  # CRAWL_BATCH_SIZE set


def test_an_idle_loop_sweeps_once_an_interval_and_requeues_orphans(settings, store):
    bus = _bus(settings)
    Frontier(store, bus).register(crawl_request("c", "http://a.example/"))
    with store.write() as con:  # its run failed for good: the URL stays queued, and ages
        con.execute("UPDATE frontier SET updated_at = updated_at - INTERVAL 5 MINUTE")
    now = [1000.0]
    coordinator = CrawlCoordinator(bus, store, POLICY, clock=lambda: now[0])
    planned = coordinator.frontier_turn(None).plan  # cuts the seed's message; its run never comes
    assert planned is not None
    assert planned.batches
    assert cursor_number(planned.cursor, SWEPT_AT) is None  # not idle: no sweep
    swept = coordinator.frontier_turn(planned.cursor).plan
    assert swept is not None
    assert [r.key for r in swept.requeues] == ["requeue-orphans-1000"]
    assert cursor_number(swept.cursor, SWEPT_AT) == 1000.0
    now[0] += IDLE_SWEEP_EVERY_S - 1
    within = coordinator.frontier_turn(swept.cursor).plan
    assert within is not None
    assert within.requeues == []  # the lake is left alone until the interval is over
    assert cursor_number(within.cursor, SWEPT_AT) == 1000.0
    now[0] += 1
    again = coordinator.frontier_turn(within.cursor).plan
    assert again is not None
    assert [r.key for r in again.requeues] == [f"requeue-orphans-{int(now[0])}"]
