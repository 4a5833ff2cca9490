"""Sensors that turn new offsets on the Kafka seeds and frontier topics into runs.

Each tick reads only watermarks (no messages), plans offset-range batches with
:func:`crawl_platform.bus.offsets.plan_batches` and keeps per-partition offsets in its cursor, so a
tick takes milliseconds whatever the backlog. The frontier sensor stops adding runs while the run
queue is full, and when the broker lost its log it recreates the topics and asks for every
pending URL to be published again.
"""

import time
from typing import NamedTuple

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from crawl_platform.bus.base import BusError
from crawl_platform.bus.kafka import KafkaBus
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
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.store.database import CrawlStore, StoreBusyError
from crawl_platform_dagster.assets.crawl_batch import frontier_batches
from crawl_platform_dagster.assets.jobs import crawl_batch_celery_job, crawl_batch_job, crawl_intake_job
from crawl_platform_dagster.instance import PARTITION_TAG_PREFIX, celery_run_config
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class TopicState(NamedTuple):
    watermarks: dict[int, tuple[int, int]]
    cursor: dict[int, int]
    epoch: int
    topic_id: str | None


ORPHAN_AFTER_S = 60.0
ACTIVE_RUN_STATUSES = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
           DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
_WAITING = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED]


def batch_run_tags(batch: Batch, run_timeout_s: int) -> dict[str, str]:
    """Tags of a batch run: one ``crawl/frontier_p<N>`` per partition it reads, which the run
    queue limits to one run at a time each (``dagster.yaml``), so two runs never fetch the same
    host; and the run timeout after which a run whose worker died is failed and retried
    (``run_retries``; landing is idempotent, so the batch still lands once)."""
    return {
        **{f"{PARTITION_TAG_PREFIX}{r.partition}": r.key for r in batch},
        "crawl/partitions": ",".join(str(p) for p in partitions_of(batch)),
        "dagster/max_runtime": str(run_timeout_s),
    }


def _watermarks(bus: KafkaBus, topic: str) -> dict[int, tuple[int, int]]:
    try:
        return bus.watermarks(topic)
    except BusError:
        # A fresh (or restarted, memory-only) broker has no topics yet.
        bus.ensure_topics()
        return bus.watermarks(topic)


def _orphans(context: SensorEvaluationContext, settings: Settings) -> int:
    """Queued URLs that nothing will fetch: older than ``ORPHAN_AFTER_S`` while no batch or
    intake run is queued or running (their run failed for good, or the broker lost the message
    without losing its log). A busy store skips the check until a later tick."""
    jobs = [crawl_batch_job.name, crawl_batch_celery_job.name, crawl_intake_job.name]
    if any(context.instance.get_runs_count(RunsFilter(job_name=job, statuses=ACTIVE_RUN_STATUSES)) for job in jobs):
        return 0
    store = CrawlStore(settings.duckdb_path, lock_timeout_s=5.0)
    if not store.path.exists():
        return 0
    try:
        count = Frontier(store, KafkaBus.from_settings(settings)).orphaned_count(ORPHAN_AFTER_S)
    except StoreBusyError:
        return 0
    if count:
        context.log.warning(f"{count} queued URLs have no batch run left to fetch them: re-publishing them")
    return count


def _read_topic(bus: KafkaBus, topic: str, raw_cursor: str | None) -> tuple[TopicState, bool]:
    """Watermarks, cursor offsets, epoch and topic id; and whether the topic was created anew since
    the cursor was written (its id changed: a restarted memory-only broker, even one whose new
    messages already refilled the old offsets). Then the cursor starts over from the new log."""
    watermarks = _watermarks(bus, topic)
    topic_id = bus.topic_id(topic)
    cursor, epoch = decode_cursor(raw_cursor)
    known = cursor_topic_id(raw_cursor)
    recreated = bool(known and topic_id and known != topic_id)
    return TopicState(watermarks, {} if recreated else cursor, epoch, topic_id), recreated


@sensor(
    jobs=[crawl_batch_job, crawl_batch_celery_job, crawl_intake_job],
    minimum_interval_seconds=2,
    default_status=DefaultSensorStatus.RUNNING,
    description="Cuts the frontier topic into batches of at most CRAWL_BATCH_SIZE URLs, one run each.",
)
def frontier_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    try:
        topic, recreated = _read_topic(KafkaBus.from_settings(settings), settings.frontier_topic, context.cursor)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    watermarks, cursor, epoch = topic.watermarks, topic.cursor, topic.epoch
    celery = settings.executor == "celery"
    batch_job = crawl_batch_celery_job if celery else crawl_batch_job
    run_config: dict[str, object] = celery_run_config(settings) if celery else {}
    waiting = context.instance.get_runs_count(RunsFilter(job_name=batch_job.name, statuses=_WAITING))
    room = max(0, settings.max_queued_runs - waiting)
    plan = plan_batches(watermarks, cursor, settings.partition_batch_size(), min(room, settings.max_runs_per_tick),
                        groups=settings.batch_groups)
    requests: list[RunRequest] = []
    if plan.lost_partitions or recreated:
        epoch += 1
        lost = "the frontier topic was created anew" if recreated else f"frontier partitions {plan.lost_partitions}"
        context.log.warning(f"{lost} lost their log: re-publishing pending URLs")
        requests.append(RunRequest(
            run_key=f"requeue-e{epoch}", job_name=crawl_intake_job.name,
            run_config={"ops": {"crawls": {"config": {"requeue_pending": True}}}},
        ))
    keys = [batch_key(epoch, batch) for batch in plan.batches]
    op_config = {"config": {"refetch_done": False, "shards": settings.shard_count()}}
    requests += [
        RunRequest(
            run_key=key, partition_key=key, job_name=batch_job.name,
            run_config={**run_config, "ops": {"crawl_batch": {"ops": {"plan_batch": op_config}}}},
            tags=batch_run_tags(batch, settings.run_timeout_s),
        )
        for key, batch in zip(keys, plan.batches, strict=True)
    ]
    if not requests and not plan.backlog and _orphans(context, settings):
        # Safety net: URLs queued long ago, nothing left to plan and no batch run in flight.
        requests.append(RunRequest(
            run_key=f"requeue-orphans-{int(time.time())}", job_name=crawl_intake_job.name,
            run_config={"ops": {"crawls": {"config": {"requeue_pending": True}}}},
        ))
    if not requests:
        reason = f"run queue full ({waiting} waiting)" if plan.backlog else "no new frontier messages"
        return SensorResult(skip_reason=reason, cursor=encode_cursor(plan.cursor, epoch, topic.topic_id))
    return SensorResult(
        run_requests=requests,
        cursor=encode_cursor(plan.cursor, epoch, topic.topic_id),
        dynamic_partitions_requests=[frontier_batches.build_add_request(keys)] if keys else [],
    )


@sensor(
    job=crawl_intake_job,
    minimum_interval_seconds=2,
    default_status=DefaultSensorStatus.RUNNING,
    description="Registers crawls submitted to the seeds topic.",
)
def seeds_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    try:
        topic, recreated = _read_topic(KafkaBus.from_settings(settings), settings.seeds_topic, context.cursor)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    epoch = topic.epoch
    plan = plan_batches(topic.watermarks, topic.cursor, batch_size=10_000, max_batches=len(topic.watermarks))
    if plan.lost_partitions or recreated:
        epoch += 1
        context.log.warning("the seeds topic lost its log: crawls submitted but not yet registered are gone")
    if not plan.ranges:
        return SensorResult(skip_reason="no new crawl requests",
                            cursor=encode_cursor(plan.cursor, epoch, topic.topic_id))
    keys = [r.key for r in plan.ranges]
    return SensorResult(
        run_requests=[RunRequest(
            run_key=f"seeds-e{epoch}-" + "+".join(keys),
            run_config={"ops": {"crawls": {"config": {"seed_ranges": keys}}}},
        )],
        cursor=encode_cursor(plan.cursor, epoch, topic.topic_id),
    )
