"""The crawl's planners: a topic's new offsets, and the run queue, cut into what to run next.

Pure functions of what one look at a topic saw (:class:`TopicState`: its watermarks, the cursor
of offsets already handed out, the topic's id) and at the run queue (:class:`QueuedRuns`):
:func:`plan_frontier` cuts the frontier topic into offset-range batches, with the frontier
partitions each one reads (one run per partition at a time is the only guarantee of politeness
across runs), an epoch bump and a requeue when the broker lost its log, and the backlog a full run
queue held back; :func:`plan_intake` cuts an intake topic (seeds or control) into one run over
every partition's new offsets. :func:`read_topic` gathers their input from a bus, and
:func:`advance_to_landed` moves a cursor past what landed. They decide nothing else: the
:class:`~crawl_platform.pipeline.coordinator.CrawlCoordinator` feeds them (batch size, priorities,
held partitions) and applies the rest of the rules. Neighbours: :mod:`crawl_platform.bus.offsets`
cuts the ranges and encodes the cursors.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from crawl_platform.bus.base import Bus, BusError
from crawl_platform.bus.offsets import (
    Batch,
    batch_key,
    cursor_topic_id,
    decode_cursor,
    encode_cursor,
    partitions_of,
    plan_batches,
)
from crawl_platform.config import Settings

INTAKE_RANGE_SIZE = 10_000
"""Most messages (crawl requests, control commands) one intake run takes per partition."""


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
class QueuedRuns:
    """What the orchestrator's run queue holds: batch runs waiting to start, and batch or intake
    runs in flight (queued, starting or running)."""

    waiting: int = 0
    in_flight: int = 0


@dataclass(frozen=True)
class LoopPolicy:
    """How big and how many: messages per partition per batch, batches per turn, the run-queue
    depth at which no more are added (backpressure), and the partition groups a batch spans. An
    automatic batch size (``CRAWL_BATCH_SIZE`` unset) is the coordinator's to set each turn
    (:meth:`~crawl_platform.pipeline.coordinator.CrawlCoordinator.batch_size`)."""

    batch_size: int
    max_runs_per_tick: int = 16
    max_queued_runs: int = 32
    batch_groups: int = 4

    @classmethod
    def from_settings(cls, settings: Settings) -> LoopPolicy:
        """The settings' policy (an automatic batch size as for one host a partition)."""
        return cls(settings.partition_batch_size(), settings.max_runs_per_tick, settings.max_queued_runs,
                   settings.batch_groups)


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
        """The plan once the caller counted the URLs queued too long (only when
        :attr:`check_orphans`; see the coordinator's idle sweep): their run failed for good or the
        broker lost their message without losing its log, so nothing will ever fetch them unless
        they are published again."""
        if not self.check_orphans or orphaned <= 0:
            return self
        requeue = Requeue(f"requeue-orphans-{int(now)}",
                          f"{orphaned} queued URLs have no batch run left to fetch them: re-publishing them")
        return replace(self, requeues=[*self.requeues, requeue], check_orphans=False)


@dataclass(frozen=True)
class IntakePlan:
    """What to take from an intake topic (seeds or control) this turn: one run over ``range_keys``."""

    run_key: str | None
    range_keys: list[str]
    cursor: str
    lost: bool  # the broker lost the topic's log: what was submitted but not yet taken is gone


def read_topic(bus: Bus, topic: str, raw_cursor: str | None, held: Collection[int] = ()) -> TopicState:
    """The topic's watermarks and id, and the cursor's offsets and epoch. A missing topic (a
    fresh or restarted memory-only broker) is created; a topic whose id differs from the one the
    cursor was written for was created anew, even if new messages already refilled the old
    offsets, so its cursor starts over. On the embedded broker the high offsets are where the logs
    really end (``KAFKA_EXACT_LOG_ENDS``, see :meth:`Bus.watermarks`), whoever produced them,
    batching or not. The ``held`` partitions' watermarks are not read (a continuing batch run
    holds them and reads their new offsets itself): on the embedded broker each read walks the
    partition's log, and the frontier sensor looks every second. Raises :class:`BusError` when the
    broker is unreachable."""
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
    (``landed``: partition -> last end, from the lake's ``batch_ranges``, see
    :meth:`~crawl_platform.pipeline.coordinator.CrawlCoordinator.landed_ends`): the batches that
    continuing batch runs cut themselves (:mod:`crawl_platform.pipeline.continuation`), and, for a
    cursor that was lost, everything that landed. A topic created anew keeps its fresh cursor: what
    landed belongs to the old one."""
    if topic.recreated:
        return topic
    cursor = dict(topic.cursor)
    for partition, end in landed.items():
        cursor[partition] = max(cursor.get(partition, 0), end)
    return replace(topic, cursor=cursor)


def plan_frontier(topic: TopicState, queue: QueuedRuns, policy: LoopPolicy,
                  priorities: Mapping[int, int] | None = None, held: Collection[int] = (),
                  continuing: bool = False) -> FrontierPlan:
    """Batches for the frontier topic's new offsets, as many as the run queue has room for, the
    partitions of higher-priority crawls first (``priorities``: partition -> the highest priority
    of a crawl with URLs queued there, see
    :meth:`~crawl_platform.pipeline.coordinator.CrawlCoordinator.priorities`); an
    epoch bump and a requeue when the broker lost its log (a high watermark below the cursor, or
    the topic created anew), so offsets a fresh broker reuses never collide with batches already
    run and every URL the broker forgot is published again from the store. Nothing is cut from
    the ``held`` partitions (a continuing batch run holds them and reads their new offsets
    itself); their cursor stays, and no URL counts as orphaned while any is held. With
    ``continuing`` runs, a partition group gets one batch per pass: its run goes on through the
    rest of the backlog itself, so a second run for the group would only queue behind it and find
    its offsets landed already."""
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
    # A held partition means a run was in flight when the sensor asked, even if the run count,
    # asked after the topic's read, finds none: a run that ended in between leaves URLs queued
    # behind its partitions' cursor, which the next pass cuts, and none of them is an orphan.
    check_orphans = not batches and not requeues and not cut.backlog and queue.in_flight == 0 and not held
    return FrontierPlan(batches, requeues, encode_cursor(cut.cursor, epoch, topic.topic_id), epoch, cut.backlog,
                        check_orphans)


def plan_intake(topic: TopicState, run_prefix: str) -> IntakePlan:
    """One run over every partition of an intake topic's new offsets (crawl requests and control
    commands are few and small); its run key is ``<run_prefix>-e<epoch>-<ranges>``."""
    cut = plan_batches(topic.watermarks, topic.cursor, batch_size=INTAKE_RANGE_SIZE,
                       max_batches=len(topic.watermarks))
    lost = bool(cut.lost_partitions or topic.recreated)
    epoch = topic.epoch + 1 if lost else topic.epoch
    keys = [r.key for r in cut.ranges]
    run_key = f"{run_prefix}-e{epoch}-" + "+".join(keys) if keys else None
    return IntakePlan(run_key, keys, encode_cursor(cut.cursor, epoch, topic.topic_id), lost)
