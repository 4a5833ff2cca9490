"""The crawl coordinator: what runs next, decided in one place for every driver of the crawl.

Three drivers move a crawl's batches: the Dagster sensors (``sensors/kafka.py``), which turn each
decision into runs; :class:`~crawl_platform.pipeline.loop.CrawlLoop`, which runs them in this
process; and a batch run that goes on to its partitions' next batch
(:mod:`crawl_platform.pipeline.continuation`). Each asks a :class:`CrawlCoordinator`, which holds
the rules they share: how many messages a batch takes (an automatic size from the hosts queued),
which partitions go first (the priority of their crawls), when an idle loop sweeps for orphaned
URLs and unconfirmed page events, what a continuing run takes on next, and where the cursor of
offsets handed out stands against what landed. It sees the orchestrator through two narrow
interfaces: a :class:`RunQueue` (what waits, what is in flight, which partitions a run holds) and a
:class:`PartitionRegistry` (which batch keys are partitions); :data:`IN_PROCESS` is both, for a
driver that runs each batch itself. The planners it feeds are the pure functions of
:mod:`crawl_platform.pipeline.planning`.

Which frontier offsets are done is the lake's to say: each batch records its offset ranges in
``batch_ranges`` in its landing transaction, and :meth:`CrawlCoordinator.landed_ends` is the one
reader. A cursor (the sensor's, or the in-process loop's) only remembers what was handed out; each
look moves it past what landed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from crawl_platform.bus.base import Bus
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import MAX_PRIORITY
from crawl_platform.bus.offsets import (
    Batch,
    batch_key,
    cursor_number,
    parse_batch_key,
    plan_batches,
    with_cursor_number,
)
from crawl_platform.config import Settings
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.page_events import EventsPublished, PageEventPublisher
from crawl_platform.pipeline.planning import (
    FrontierPlan,
    IntakePlan,
    LoopPolicy,
    QueuedRuns,
    TopicState,
    advance_to_landed,
    plan_frontier,
    plan_intake,
    read_topic,
)
from crawl_platform.store.database import CrawlStore

ORPHAN_AFTER_S = 60.0
"""URLs queued this long, with nothing planned and no run in flight, are published again."""

IDLE_SWEEP_EVERY_S = 15.0
"""How often the frontier sensor of an idle loop looks for orphaned URLs (queued over
:data:`ORPHAN_AFTER_S`) and for page events no frontier step got confirmed: two lake reads, which
an idle code server would otherwise make every second. An orphan is then found 60-75 s after it
was queued instead of 60-61 s."""

SWEPT_AT = "swept_at"
"""In a frontier cursor: when the loop last swept (Unix time)."""


class RunQueue(Protocol):
    """The orchestrator's run queue, as the coordinator asks it. A turn asks each question at most
    once, and only when the answer matters."""

    def held_partitions(self) -> frozenset[int]:
        """Frontier partitions that a queued or running batch run holds: a continuing run reads
        their new offsets itself, so nothing is cut from them. Asked only of continuing runs."""
        ...

    def unlimited_partitions(self, partitions: Collection[int]) -> str | None:
        """Why no batch may be queued now: a partition among ``partitions`` that the queue does
        not keep to one run at a time, so that two runs could fetch its hosts at once. None when it
        keeps every one; the coordinator then plans, and otherwise plans nothing and moves no cursor."""
        ...

    def counts(self) -> QueuedRuns:
        """Batch runs waiting to start (no more are planned once they fill the queue), and batch or
        intake runs in flight (while any is, no queued URL counts as orphaned)."""
        ...


class PartitionRegistry(Protocol):
    """Where the orchestrator keeps the partitions of the batch assets."""

    def add_partitions(self, keys: Sequence[str]) -> None:
        """Make each batch key a partition, before any run reads its batch; the coordinator calls
        it with every batch it cuts."""
        ...


class InProcessRuns:
    """The run queue and partitions of a driver that runs each batch itself, at once: nothing
    waits, nothing is held, one batch runs at a time, and a batch key names no partition."""

    def held_partitions(self) -> frozenset[int]:
        return frozenset()

    def unlimited_partitions(self, partitions: Collection[int]) -> str | None:
        return None

    def counts(self) -> QueuedRuns:
        return QueuedRuns()

    def add_partitions(self, keys: Sequence[str]) -> None:
        return None


IN_PROCESS = InProcessRuns()


@dataclass(frozen=True)
class NextBatch:
    """One more batch a continuing run takes on: its partition key (which names its offset ranges)
    and the ranges, one per partition the run holds."""

    key: str
    ranges: Batch

    @property
    def ends(self) -> dict[int, int]:
        return {r.partition: r.end for r in self.ranges}


@dataclass(frozen=True)
class FrontierTurn:
    """One look at the frontier topic: the plan, or None when the run queue refused (``refused``
    says why; nothing is planned and the cursor stays); the run queue seen, and the page events
    the idle sweep published again."""

    plan: FrontierPlan | None
    refused: str = ""
    queue: QueuedRuns = field(default_factory=QueuedRuns)
    events: EventsPublished = field(default_factory=EventsPublished)


def _fresh(topic: TopicState, held: Collection[int]) -> bool:
    """Whether a partition no run holds has offsets past the cursor."""
    return any(high > topic.cursor.get(part, low) for part, (low, high) in topic.watermarks.items()
               if part not in held)


class CrawlCoordinator:
    """Decides what runs next for every driver: the frontier's batches and requeues, the intake
    topics' runs, a continuing run's next batch. ``policy`` sets the batch size unless
    ``auto_batch_size`` is given (messages per partition for a number of hosts a partition, see
    :meth:`~crawl_platform.config.Settings.partition_batch_size`); ``max_priority`` caps a crawl's
    priority; ``events`` publishes page events again in the idle sweep (None: page events are off);
    ``continuing``: batch runs go on to their partitions' next batches themselves; an idle loop
    sweeps at most every ``sweep_every_s`` (0: every idle turn), by ``clock``."""

    def __init__(self, bus: Bus, store: CrawlStore, policy: LoopPolicy, *,
                 auto_batch_size: Callable[[float], int] | None = None, max_priority: int = MAX_PRIORITY,
                 events: PageEventPublisher | None = None, continuing: bool = False,
                 sweep_every_s: float = IDLE_SWEEP_EVERY_S, clock: Callable[[], float] = time.time) -> None:
        self.bus = bus
        self.store = store
        self.read_model = FrontierReadModel(store)
        self.policy = policy
        self.auto_batch_size = auto_batch_size
        self.max_priority = max_priority
        self.events = events
        self.continuing = continuing
        self.sweep_every_s = sweep_every_s
        self.clock = clock

    @classmethod
    def from_settings(cls, settings: Settings, bus: Bus | None = None, store: CrawlStore | None = None, *,
                      continuing: bool | None = None, sweep_every_s: float = IDLE_SWEEP_EVERY_S,
                      ) -> CrawlCoordinator:
        """The coordinator the settings describe, on ``bus`` and ``store`` (by default the
        settings'); ``continuing`` defaults to whether sensor-started runs go on
        (``CRAWL_RUN_CONTINUE_S``)."""
        bus = bus if bus is not None else KafkaBus.from_settings(settings)
        store = store if store is not None else CrawlStore.from_settings(settings)
        return cls(bus, store, LoopPolicy.from_settings(settings),
                   auto_batch_size=None if settings.batch_size else settings.partition_batch_size,
                   max_priority=settings.max_priority,
                   events=PageEventPublisher(store, bus) if settings.page_events else None,
                   continuing=settings.continue_seconds() > 0 if continuing is None else continuing,
                   sweep_every_s=sweep_every_s)

    # --- the rules every driver shares ------------------------------------------------------------
    def batch_size(self, cutting: bool = True) -> int:
        """Messages per partition of the next batches: the policy's, or the automatic size for the
        hosts with URLs queued now, spread over the topic's partitions (a host's requests follow
        one another, different hosts' run side by side). The hosts are counted only when
        ``cutting`` (the caller is about to cut something) and the lake exists."""
        if self.auto_batch_size is None:
            return self.policy.batch_size
        hosts = self.read_model.queued_hosts() if cutting and self.store.exists() else 0
        return self.auto_batch_size(hosts / self.bus.partitions)

    def priorities(self, partitions: int) -> dict[int, int]:
        """Frontier partition -> the highest priority (at most ``max_priority``) of an active crawl
        with URLs queued there, on a topic of ``partitions`` partitions; its batches are cut and
        run first. One grouped read of the lake; none before it exists."""
        if not self.store.exists():
            return {}
        return self.read_model.partition_priorities(
            lambda host: self.bus.partition_of(host.encode(), partitions), self.max_priority)

    def landed_ends(self, epoch: int, partitions: Collection[int] | None = None) -> dict[int, int]:
        """Which frontier offsets are done: partition -> the end of the last offset range a batch
        of ``epoch`` landed there (``partitions``: only those), from the lake's ``batch_ranges``;
        none before the lake exists."""
        if not self.store.exists():
            return {}
        return self.read_model.landed_ends(epoch, partitions)

    def sweep(self, plan: FrontierPlan, cursor: str | None) -> tuple[FrontierPlan, EventsPublished]:
        """The idle sweep: once the loop is idle (:attr:`FrontierPlan.check_orphans`: nothing
        planned, no backlog, no run in flight), at most every ``sweep_every_s``, a requeue when
        URLs were queued over :data:`ORPHAN_AFTER_S` (their run failed for good, or the broker lost
        their message without losing its log), and the page events of batches whose frontier step
        never got them confirmed published again. The time of the last sweep is kept in the
        cursor (:data:`SWEPT_AT`; a clock set back sweeps too)."""
        swept_at = cursor_number(cursor, SWEPT_AT) or 0.0
        events = EventsPublished()
        now = self.clock()
        if plan.check_orphans and not 0 <= now - swept_at < self.sweep_every_s:
            lake = self.store.exists()
            plan = plan.with_orphans(self.read_model.orphaned_count(ORPHAN_AFTER_S) if lake else 0, now)
            if self.events is not None and lake:
                events = self.events.republish_unrecorded()
            swept_at = now
        if swept_at:
            plan = replace(plan, cursor=with_cursor_number(plan.cursor, SWEPT_AT, swept_at))
        return plan, events

    # --- turns --------------------------------------------------------------------------------------
    def frontier_turn(self, cursor: str | None, queue: RunQueue = IN_PROCESS,
                      partitions: PartitionRegistry = IN_PROCESS) -> FrontierTurn:
        """What to run for the frontier topic now, after the turn that left ``cursor``: the
        topic's watermarks (not those of partitions a continuing run holds), the cursor moved past
        what landed, then batches as the queue has room for, higher-priority partitions first, each
        added to ``partitions``; a requeue when the broker lost its log; the idle sweep. Raises
        :class:`~crawl_platform.bus.base.BusError` when the broker is out of reach."""
        held = queue.held_partitions() if self.continuing else frozenset()
        topic = read_topic(self.bus, self.bus.frontier_topic, cursor, held)
        refused = queue.unlimited_partitions(topic.partition_ids)
        if refused:
            return FrontierTurn(None, refused)
        runs = queue.counts()
        if _fresh(topic, held):  # the lake is read only when there is something new to cut
            topic = advance_to_landed(topic, self.landed_ends(topic.epoch))
        cutting = _fresh(topic, held)
        policy = replace(self.policy, batch_size=self.batch_size(cutting))
        priorities = self.priorities(len(topic.partition_ids)) if cutting else {}
        plan = plan_frontier(topic, runs, policy, priorities, held, self.continuing)
        plan, events = self.sweep(plan, cursor)
        if plan.batches:
            partitions.add_partitions([batch.key for batch in plan.batches])
        return FrontierTurn(plan, queue=runs, events=events)

    def seeds_turn(self, cursor: str | None) -> IntakePlan:
        """What to register from the seeds topic now: one intake run over its new offsets."""
        return plan_intake(read_topic(self.bus, self.bus.seeds_topic, cursor), "seeds")

    def control_turn(self, cursor: str | None) -> IntakePlan:
        """What to apply from the control topic now: one control run over its new offsets."""
        return plan_intake(read_topic(self.bus, self.bus.control_topic, cursor), "control")

    # --- a run that goes on ----------------------------------------------------------------------
    def next_batch_after(self, key: str, partitions: PartitionRegistry = IN_PROCESS) -> NextBatch | None:
        """The batch after batch ``key`` on its partitions: from the end of ``key``'s ranges or of
        the last range landed there, whichever is later (a retried run goes on where it was)."""
        epoch, ranges = parse_batch_key(key)
        ends = {r.partition: r.end for r in ranges}
        for partition, end in self.landed_ends(epoch, ends).items():
            ends[partition] = max(ends[partition], end)
        return self._cut_next(epoch, ends, partitions)

    def next_batch(self, done: NextBatch, partitions: PartitionRegistry = IN_PROCESS) -> NextBatch | None:
        """The batch after ``done``, which the run just landed (or is landing)."""
        return self._cut_next(parse_batch_key(done.key)[0], done.ends, partitions)

    def _cut_next(self, epoch: int, ends: dict[int, int], partitions: PartitionRegistry) -> NextBatch | None:
        """What arrived on the partitions of ``ends`` after them, up to a batch, added to
        ``partitions``; None when nothing did, or when the broker lost a partition's log (the
        frontier sensor requeues then)."""
        bus = self.bus
        # Only the run's own partitions are asked for: on the embedded broker each read walks the
        # partition's log (see KafkaBus.watermarks).
        marks = bus.watermarks(bus.frontier_topic, skip=set(range(bus.partitions)) - set(ends))
        held = {p: marks[p] for p in ends if p in marks}
        if len(held) < len(ends):
            return None
        cutting = any(high > ends[p] for p, (_low, high) in held.items())
        cut = plan_batches(held, ends, self.batch_size(cutting), max_batches=1, groups=1)
        if cut.lost_partitions or not cut.batches:
            return None
        batch = NextBatch(batch_key(epoch, cut.batches[0]), cut.batches[0])
        partitions.add_partitions([batch.key])
        return batch
