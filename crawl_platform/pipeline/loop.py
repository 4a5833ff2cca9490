"""The crawl loop: what to run next, decided once, for the sensors and for in-process drivers alike.

Each turn of the loop looks at a topic (its watermarks, the cursor of offsets already handed out,
the topic's id) and at the run queue, and returns a plan: which offset-range batches to run, with
the frontier partitions each one reads (one run per partition at a time is the only guarantee of
politeness across runs), whether the broker lost its log (then the epoch goes up and every
pending URL is published again from the store), how much backlog the full run queue held back,
and whether to look for orphaned URLs. The planners (:func:`plan_frontier`, :func:`plan_seeds`)
are pure; :func:`read_topic` gathers their input from a bus. The Dagster sensors
(``sensors/kafka.py``) map a plan to ``RunRequest``s; :class:`CrawlLoop` runs the same plans in
this process, for tests and benchmarks. Neighbours: :mod:`crawl_platform.bus.offsets` cuts the
ranges, :mod:`crawl_platform.pipeline.batch` and :mod:`~crawl_platform.pipeline.intake` execute them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from crawl_platform.bus.base import Bus, BusError
from crawl_platform.bus.messages import MAX_PRIORITY
from crawl_platform.bus.offsets import (
    Batch,
    OffsetRange,
    batch_key,
    cursor_topic_id,
    decode_cursor,
    encode_cursor,
    partitions_of,
    plan_batches,
)
from crawl_platform.config import Settings
from crawl_platform.pipeline.batch import BatchCrawler, BatchReport
from crawl_platform.pipeline.control import ControlIntake
from crawl_platform.pipeline.intake import SeedIntake

ORPHAN_AFTER_S = 60.0
"""URLs queued this long, with nothing planned and no run in flight, are published again."""

IDLE_SWEEP_EVERY_S = 15.0
"""How often the frontier sensor of an idle loop looks for orphaned URLs (queued over
:data:`ORPHAN_AFTER_S`) and for page events no frontier step got confirmed: two lake reads, which
made at every tick would take most of an idle code server's CPU (measured by
``benchmarks/platform_cost.py``). An orphan is then found up to this much later than
:data:`ORPHAN_AFTER_S` after it was queued."""

SEED_RANGE_SIZE = 10_000
"""Most crawl requests one intake run registers per seeds partition."""


@dataclass(frozen=True)
class TopicState:
    """What one look at a topic saw, and the cursor the previous turn left."""

    watermarks: dict[int, tuple[int, int]]  # of every partition but the held ones (see read_topic)
    cursor: dict[int, int]
    epoch: int
    topic_id: str | None
    recreated: bool = False  # the topic's id changed since the cursor was written
    partitions: tuple[int, ...] = ()  # every partition, held ones too; () for those of watermarks

    @property
    def partition_ids(self) -> tuple[int, ...]:
        """Every partition of the topic, whether its watermarks were read or not."""
        return self.partitions or tuple(sorted(self.watermarks))


@dataclass(frozen=True)
class RunQueue:
    """The orchestrator's run queue: batch runs waiting to start, and batch or intake runs in
    flight (queued, starting or running)."""

    waiting: int = 0
    in_flight: int = 0


@dataclass(frozen=True)
class LoopPolicy:
    """How big and how many: messages per partition per batch, batches per turn, the run-queue
    depth at which no more are added (backpressure), and the partition groups a batch spans."""

    batch_size: int
    max_runs_per_tick: int = 16
    max_queued_runs: int = 32
    batch_groups: int = 4

    @classmethod
    def from_settings(cls, settings: Settings, queued_hosts: int = 0) -> LoopPolicy:
        """The settings' policy; ``queued_hosts`` (hosts with queued URLs, spread over the topic's
        partitions) sizes an auto batch."""
        return cls(settings.partition_batch_size(queued_hosts / settings.topic_partitions),
                   settings.max_runs_per_tick, settings.max_queued_runs, settings.batch_groups)


@dataclass(frozen=True)
class PlannedBatch:
    """One batch to run: its partition key (which names its offset ranges) and the frontier
    partitions it reads. The orchestrator must never run two batches that share a partition at
    the same time: a host's URLs all live in one partition, so that is what keeps a host polite
    across runs."""

    key: str
    ranges: Batch
    priority: int = 0  # the highest priority of a crawl with URLs queued in its partitions

    @property
    def partitions(self) -> list[int]:
        return partitions_of(self.ranges)


@dataclass(frozen=True)
class Requeue:
    """Publish every pending URL of every crawl again from the store (an intake run); ``key``
    is its run key, so one loss asks once."""

    key: str
    reason: str


@dataclass(frozen=True)
class FrontierPlan:
    """What to run for the frontier topic this turn; ``cursor`` is the encoded cursor to keep."""

    batches: list[PlannedBatch]
    requeues: list[Requeue]
    cursor: str
    epoch: int
    backlog: int  # messages the full run queue held back
    check_orphans: bool  # nothing planned, no backlog, nothing in flight: look for orphans

    @property
    def idle(self) -> bool:
        return not self.batches and not self.requeues

    @property
    def skip_reason(self) -> str:
        return "run queue full" if self.backlog else "no new frontier messages"

    def with_orphans(self, orphaned: int, now: float) -> FrontierPlan:
        """The plan once the caller counted the URLs queued over :data:`ORPHAN_AFTER_S` (only when
        :attr:`check_orphans`): their run failed for good or the broker lost their message
        without losing its log, so nothing will ever fetch them unless they are published again."""
        if not self.check_orphans or orphaned <= 0:
            return self
        requeue = Requeue(f"requeue-orphans-{int(now)}",
                          f"{orphaned} queued URLs have no batch run left to fetch them: re-publishing them")
        return replace(self, requeues=[*self.requeues, requeue], check_orphans=False)


@dataclass(frozen=True)
class SeedsPlan:
    """What to register from the seeds topic this turn (one intake run over ``range_keys``)."""

    run_key: str | None
    range_keys: list[str]
    cursor: str
    lost: bool  # the broker lost the seeds log: crawls submitted but not registered are gone


def read_topic(bus: Bus, topic: str, raw_cursor: str | None, held: Collection[int] = ()) -> TopicState:
    """The topic's watermarks and id, and the cursor's offsets and epoch. A missing topic (a
    fresh or restarted memory-only broker) is created; a topic whose id differs from the one the
    cursor was written for was created anew, even if new messages already refilled the old
    offsets, so its cursor starts over. On the embedded broker the high offsets are where the logs
    really end (``KAFKA_EXACT_LOG_ENDS``, see :meth:`Bus.watermarks`), whoever produced them,
    batching or not. The ``held`` partitions' watermarks are not
    read (a continuing batch run holds them and reads their new offsets itself): on the embedded
    broker each read walks the partition's log, at a cost that grows with it, and the frontier
    sensor looks every second. Raises :class:`BusError` when the broker is unreachable."""
    try:
        watermarks = bus.watermarks(topic, skip=held)
    except BusError:
        bus.ensure_topics()
        watermarks = bus.watermarks(topic, skip=held)
    # Every partition not held was read; the held ones were cut from this topic before (a topic
    # made anew with fewer partitions shows as recreated below, and its cursor starts over).
    partitions = tuple(sorted(set(watermarks) | set(held))) if held else ()
    topic_id = bus.topic_id(topic)
    cursor, epoch = decode_cursor(raw_cursor)
    known = cursor_topic_id(raw_cursor)
    recreated = bool(known and topic_id and known != topic_id)
    return TopicState(watermarks, {} if recreated else cursor, epoch, topic_id, recreated, partitions)


def advance_to_landed(topic: TopicState, landed: Mapping[int, int]) -> TopicState:
    """The topic with its cursor moved past the offset ranges that batches of its epoch landed
    (``landed``: partition -> last end, see
    :meth:`~crawl_platform.frontier.read_model.FrontierReadModel.landed_ends`): the levels that
    continuing batch runs cut themselves (:mod:`crawl_platform.pipeline.continuation`). A topic
    created anew keeps its fresh cursor: what landed belongs to the old one."""
    if topic.recreated:
        return topic
    cursor = dict(topic.cursor)
    for partition, end in landed.items():
        cursor[partition] = max(cursor.get(partition, 0), end)
    return replace(topic, cursor=cursor)


def plan_frontier(topic: TopicState, queue: RunQueue, policy: LoopPolicy,
                  priorities: Mapping[int, int] | None = None, held: Collection[int] = (),
                  continuing: bool = False) -> FrontierPlan:
    """Batches for the frontier topic's new offsets, as many as the run queue has room for, the
    partitions of higher-priority crawls first (``priorities``: partition -> the highest priority
    of a crawl with URLs queued there, see
    :meth:`~crawl_platform.frontier.read_model.FrontierReadModel.partition_priorities`); an
    epoch bump and a requeue when the broker lost its log (a high watermark below the cursor, or
    the topic created anew), so offsets a fresh broker reuses never collide with batches already
    run and every URL the broker forgot is published again from the store. Nothing is cut from
    the ``held`` partitions (a continuing batch run holds them and reads their new offsets
    itself); their cursor stays. With ``continuing`` runs, a partition group gets one batch per
    pass: its run goes on through the rest of the backlog itself, so a second run for the group
    would only queue behind it and find its offsets landed already."""
    room = max(0, policy.max_queued_runs - queue.waiting)
    marks = {p: m for p, m in topic.watermarks.items() if p not in held} if held else topic.watermarks
    cut = plan_batches(marks, topic.cursor, policy.batch_size, min(room, policy.max_runs_per_tick),
                       groups=policy.batch_groups, priorities=priorities, rounds=1 if continuing else 0)
    epoch = topic.epoch
    requeues: list[Requeue] = []
    if cut.lost_partitions or topic.recreated:
        epoch += 1
        lost = ("the frontier topic was created anew (the broker lost it)" if topic.recreated
                else f"frontier partitions {cut.lost_partitions} lost their log")
        requeues.append(Requeue(f"requeue-e{epoch}", f"{lost}: re-publishing pending URLs"))
    rank = priorities or {}
    batches = [PlannedBatch(batch_key(epoch, ranges), ranges, max(rank.get(r.partition, 0) for r in ranges))
               for ranges in cut.batches]
    check_orphans = not batches and not requeues and not cut.backlog and queue.in_flight == 0
    return FrontierPlan(batches, requeues, encode_cursor(cut.cursor, epoch, topic.topic_id), epoch, cut.backlog,
                        check_orphans)


def plan_seeds(topic: TopicState) -> SeedsPlan:
    """One intake run over every seeds partition's new offsets (crawl requests are few and small)."""
    cut = plan_batches(topic.watermarks, topic.cursor, batch_size=SEED_RANGE_SIZE,
                       max_batches=len(topic.watermarks))
    lost = bool(cut.lost_partitions or topic.recreated)
    epoch = topic.epoch + 1 if lost else topic.epoch
    keys = [r.key for r in cut.ranges]
    run_key = f"seeds-e{epoch}-" + "+".join(keys) if keys else None
    return SeedsPlan(run_key, keys, encode_cursor(cut.cursor, epoch, topic.topic_id), lost)


@dataclass
class LoopReport:
    """What :meth:`CrawlLoop.run_until_idle` did."""

    turns: int = 0
    crawls_registered: list[str] = field(default_factory=list)
    batches: list[BatchReport] = field(default_factory=list)
    requeued: int = 0
    controls: int = 0  # control commands applied


class CrawlLoop:
    """The crawl loop in this process: the same plans the sensors make, executed one batch after
    another (the run queue is always empty here). For tests, benchmarks and scripts; a batch run
    under Dagster executes exactly these calls, split into steps.

    ``before_batch`` is called with each planned batch before it runs (tests inject faults there).
    """

    def __init__(self, bus: Bus, crawler: BatchCrawler, intake: SeedIntake, policy: LoopPolicy,
                 before_batch: Callable[[PlannedBatch], None] | None = None, settings: Settings | None = None,
                 control: ControlIntake | None = None) -> None:
        self.bus = bus
        self.control = control or ControlIntake(bus, crawler.store)
        self.control_cursor: str | None = None
        self.crawler = crawler
        self.intake = intake
        self.policy = policy
        self.before_batch = before_batch
        self.seeds_cursor: str | None = None
        self.frontier_cursor: str | None = None
        self.settings = settings  # when given, an auto batch size follows the hosts queued, as in the sensor

    @classmethod
    def from_settings(cls, settings: Settings, before_batch: Callable[[PlannedBatch], None] | None = None,
                      ) -> CrawlLoop:
        crawler = BatchCrawler.from_settings(settings)
        return cls(crawler.bus, crawler, SeedIntake.from_settings(settings), LoopPolicy.from_settings(settings),
                   before_batch, settings)

    def policy_now(self) -> LoopPolicy:
        """The policy, with an auto batch sized for the hosts queued now (as the sensor does)."""
        if self.settings is None or self.settings.batch_size:
            return self.policy
        per_partition = self.crawler.frontier.read_model.queued_hosts() / self.settings.topic_partitions
        return replace(self.policy, batch_size=self.settings.partition_batch_size(per_partition))

    def turn(self, report: LoopReport) -> bool:
        """One turn over the seeds and frontier topics; False when it found nothing to do."""
        busy = False
        seeds = plan_seeds(read_topic(self.bus, self.bus.seeds_topic, self.seeds_cursor))
        self.seeds_cursor = seeds.cursor
        for key in seeds.range_keys:
            registered = self.intake.register(OffsetRange.parse(key))
            report.crawls_registered += registered.crawls
            busy = True
        controls = plan_seeds(read_topic(self.bus, self.bus.control_topic, self.control_cursor))
        self.control_cursor = controls.cursor
        for key in controls.range_keys:
            report.controls += len(self.control.apply(OffsetRange.parse(key)).outcomes)
            busy = True
        topic = read_topic(self.bus, self.bus.frontier_topic, self.frontier_cursor)
        max_priority = self.settings.max_priority if self.settings is not None else MAX_PRIORITY
        priorities = self.crawler.frontier.read_model.partition_priorities(
            lambda host: self.bus.partition_of(host.encode(), len(topic.partition_ids)), max_priority)
        plan = plan_frontier(topic, RunQueue(), self.policy_now(), priorities)
        self.frontier_cursor = plan.cursor
        if plan.check_orphans:
            plan = plan.with_orphans(self.crawler.frontier.orphaned_count(ORPHAN_AFTER_S), 0.0)
            if self.crawler.events is not None:  # idle: events of batches whose retries all failed
                self.crawler.events.republish_unrecorded()
        for _requeue in plan.requeues:
            report.requeued += self.crawler.frontier.requeue_all_pending().published
            busy = True
        for batch in plan.batches:
            if self.before_batch is not None:
                self.before_batch(batch)
            report.batches.append(self.crawler.fetch_and_land(batch.key, batch.ranges, refetch_done=False))
            self.crawler.expand(batch.key)
            busy = True
        return busy

    def run_until_idle(self, max_turns: int = 1_000) -> LoopReport:
        """Turn until a turn finds nothing to do; raises RuntimeError after ``max_turns``."""
        report = LoopReport()
        while report.turns < max_turns:
            report.turns += 1
            if not self.turn(report):
                return report
        raise RuntimeError(f"the crawl loop still had work after {max_turns} turns")
