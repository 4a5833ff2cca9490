"""Sensors that turn new offsets on the Kafka seeds, frontier and control topics into runs.

Each tick reads the topic's watermarks (no messages; on the embedded broker, where its logs
really end: ``KAFKA_EXACT_LOG_ENDS``) and the run queue, asks the engine's crawl loop what to run next
(:func:`crawl_platform.pipeline.loop.plan_frontier` and
:func:`~crawl_platform.pipeline.loop.plan_seeds`) and maps that plan to ``RunRequest``s: every
rule (batch size, backpressure, broker-loss epochs and requeues, the orphan rule, which frontier
partitions a batch reads) is the engine's. What is Dagster's: run keys, partition keys, the run
tags that the run queue limits to one run per frontier partition (``dagster.yaml``), and the job
and executor config.
"""

import time
from collections.abc import Iterable

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
from crawl_platform.bus.offsets import OffsetRange, cursor_number, with_cursor_number
from crawl_platform.config import Settings
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.loop import (
    IDLE_SWEEP_EVERY_S,
    ORPHAN_AFTER_S,
    FrontierPlan,
    LoopPolicy,
    PlannedBatch,
    RunQueue,
    TopicState,
    advance_to_landed,
    plan_frontier,
    plan_seeds,
    read_topic,
)
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.assets.control import crawl_control_job
from crawl_platform_dagster.assets.crawl_batch import frontier_batches
from crawl_platform_dagster.assets.intake import crawls_materialization
from crawl_platform_dagster.assets.jobs import crawl_batch_celery_job, crawl_batch_job, crawl_intake_job
from crawl_platform_dagster.instance import (
    PARTITION_TAG_PREFIX,
    celery_run_config,
    limited_partitions,
    missing_limits_hint,
)
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource

ACTIVE_RUN_STATUSES = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
                       DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
_WAITING = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED]
_REQUEUE_CONFIG = {"ops": {"crawls": {"config": {"requeue_pending": True}}}}


def batch_run_tags(batch: PlannedBatch, run_timeout_s: int) -> dict[str, str]:
    """Tags of a batch run: one ``crawl/frontier_p<N>`` per partition it reads, which the run
    queue limits to one run at a time each (``dagster.yaml``), so two runs never fetch the same
    host; and the run timeout after which a run whose worker died is failed and retried
    (``run_retries``; landing is idempotent, so the batch still lands once)."""
    return {
        **{f"{PARTITION_TAG_PREFIX}{r.partition}": r.key for r in batch.ranges},
        "crawl/partitions": ",".join(str(p) for p in batch.partitions),
        "dagster/max_runtime": str(run_timeout_s),
        # The run queue starts higher-priority runs first: the highest priority of a crawl with
        # URLs queued in the batch's partitions (the engine's plan also cuts those batches first).
        "dagster/priority": str(batch.priority),
    }


def _unlimited_partitions(context: SensorEvaluationContext, partitions: Iterable[int]) -> str | None:
    """Why no batch may run: a frontier partition the instance's run queue does not limit to one
    run at a time (a topic larger than ``dagster.yaml`` was written for), whose hosts two runs
    could then fetch at once. None without a run queue (an in-process instance runs at once)."""
    queue = context.instance.get_concurrency_config().run_queue_config
    if queue is None:
        return None
    limited = limited_partitions(queue.tag_concurrency_limits)
    missing = sorted(set(partitions) - limited)
    if not missing:
        return None
    return (f"frontier partitions {', '.join(map(str, missing))} have no one-run-at-a-time limit in dagster.yaml "
            f"(it limits {', '.join(map(str, sorted(limited))) or 'none'}): {missing_limits_hint(missing)}, "
            "or write it anew")


def _run_queue(context: SensorEvaluationContext, batch_job_name: str) -> RunQueue:
    runs = context.instance
    waiting = runs.get_runs_count(RunsFilter(job_name=batch_job_name, statuses=_WAITING))
    jobs = [crawl_batch_job.name, crawl_batch_celery_job.name, crawl_intake_job.name]
    in_flight = sum(runs.get_runs_count(RunsFilter(job_name=job, statuses=ACTIVE_RUN_STATUSES)) for job in jobs)
    return RunQueue(waiting, in_flight)


def _held_partitions(context: SensorEvaluationContext, batch_job_name: str) -> frozenset[int]:
    """Frontier partitions a queued or running batch run holds (its ``crawl/partitions`` tag):
    a continuing run reads their new offsets itself, so the sensor cuts nothing from them."""
    runs = context.instance.get_runs(RunsFilter(job_name=batch_job_name, statuses=ACTIVE_RUN_STATUSES))
    return frozenset(int(p) for run in runs for p in run.tags.get("crawl/partitions", "").split(",") if p)


def _fresh(topic: TopicState, held: frozenset[int] = frozenset()) -> bool:
    """Whether a partition no run holds has offsets past the cursor."""
    return any(high > topic.cursor.get(part, low) for part, (low, high) in topic.watermarks.items()
               if part not in held)


def _advance_to_landed(settings: Settings, topic: TopicState, held: frozenset[int]) -> TopicState:
    """The topic with its cursor past the levels continuing runs cut and landed themselves; one
    read of the lake, only when a partition no run holds has new offsets."""
    store = CrawlStore.from_settings(settings)
    if not _fresh(topic, held) or not store.exists():
        return topic
    return advance_to_landed(topic, FrontierReadModel(store).landed_ends(topic.epoch))


_SWEPT_AT = "swept_at"  # in the frontier sensor's cursor: when it last looked for orphans (Unix time)


def _count_orphans(settings: Settings) -> int:
    """Queued URLs older than the orphan age; none before the lake exists."""
    store = CrawlStore.from_settings(settings)
    if not store.exists():
        return 0
    return FrontierReadModel(store).orphaned_count(ORPHAN_AFTER_S)


def _sweep_page_events(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> None:
    """Once the loop is idle: publish the page events of batches whose frontier step never got
    them confirmed (all its retries failed); none before the lake exists."""
    frontier = crawl.frontier()
    events = crawl.page_events(frontier)
    if events is None or not frontier.store.exists():
        return
    swept = events.republish_unrecorded()
    if swept.batches:
        context.log.info(f"page events of {swept.batches} unrecorded batches published again: "
                         f"{swept.events} confirmed, {swept.unconfirmed} not")


def _queued_hosts(settings: Settings, topic: TopicState, held: frozenset[int]) -> int:
    """Hosts with queued URLs, which size an auto batch; not asked when CRAWL_BATCH_SIZE is set,
    before the lake exists or when the topic has nothing new to cut."""
    store = CrawlStore.from_settings(settings)
    if settings.batch_size or not _fresh(topic, held) or not store.exists():
        return 0
    return FrontierReadModel(store).queued_hosts()


def _partition_priorities(settings: Settings, topic: TopicState, held: frozenset[int]) -> dict[int, int]:
    """Frontier partition -> the highest priority of an active crawl with URLs queued there; asked
    only when the topic has new offsets to cut and the lake exists (one grouped read of the lake)."""
    store = CrawlStore.from_settings(settings)
    if not _fresh(topic, held) or not store.exists():
        return {}
    bus = KafkaBus.from_settings(settings)
    partitions = len(topic.partition_ids)
    return FrontierReadModel(store).partition_priorities(lambda host: bus.partition_of(host.encode(), partitions),
                                                         settings.max_priority)


def _batch_requests(plan: FrontierPlan, settings: Settings) -> list[RunRequest]:
    celery = settings.executor == "celery"
    batch_job = crawl_batch_celery_job if celery else crawl_batch_job
    run_config: dict[str, object] = celery_run_config(settings) if celery else {}
    op_config = {"config": {"refetch_done": False, "shards": settings.shard_count()}}
    ops: dict[str, object] = {"crawl_batch": {"ops": {"plan_batch": op_config}}}
    if settings.continue_seconds() > 0:
        ops["frontier"] = {"config": {"continue_seconds": settings.continue_seconds()}}
    return [
        RunRequest(
            run_key=batch.key, partition_key=batch.key, job_name=batch_job.name,
            run_config={**run_config, "ops": ops},
            tags=batch_run_tags(batch, settings.run_timeout_s),
        )
        for batch in plan.batches
    ]


@sensor(
    jobs=[crawl_batch_job, crawl_batch_celery_job, crawl_intake_job],
    minimum_interval_seconds=1,
    default_status=DefaultSensorStatus.RUNNING,
    description="Cuts the frontier topic into batches of at most CRAWL_BATCH_SIZE URLs, one run each.",
)
def frontier_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    batch_job = crawl_batch_celery_job if settings.executor == "celery" else crawl_batch_job
    continuing = settings.continue_seconds() > 0  # batch runs go on to their partitions' next levels themselves
    held = _held_partitions(context, batch_job.name) if continuing else frozenset()
    try:
        topic = read_topic(KafkaBus.from_settings(settings), settings.frontier_topic, context.cursor, held=held)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    unlimited = _unlimited_partitions(context, topic.partition_ids)
    if unlimited:
        return SensorResult(skip_reason=unlimited)  # the cursor stays: nothing is planned, nothing skipped
    queue = _run_queue(context, batch_job.name)
    if continuing:
        topic = _advance_to_landed(settings, topic, held)
    plan = plan_frontier(topic, queue, LoopPolicy.from_settings(settings, _queued_hosts(settings, topic, held)),
                         _partition_priorities(settings, topic, held), held, continuing)
    swept_at = cursor_number(context.cursor, _SWEPT_AT) or 0.0
    now = time.time()
    if plan.check_orphans and not 0 <= now - swept_at < IDLE_SWEEP_EVERY_S:  # (a clock set back sweeps too)
        plan = plan.with_orphans(_count_orphans(settings), now)
        _sweep_page_events(context, crawl)
        swept_at = now
    cursor = with_cursor_number(plan.cursor, _SWEPT_AT, swept_at) if swept_at else plan.cursor
    for requeue in plan.requeues:
        context.log.warning(requeue.reason)
    requests = [RunRequest(run_key=r.key, job_name=crawl_intake_job.name, run_config=_REQUEUE_CONFIG)
                for r in plan.requeues]
    requests += _batch_requests(plan, settings)
    if not requests:
        reason = f"{plan.skip_reason} ({queue.waiting} waiting)" if plan.backlog else plan.skip_reason
        return SensorResult(skip_reason=reason, cursor=cursor)
    keys = [batch.key for batch in plan.batches]
    return SensorResult(
        run_requests=requests,
        cursor=cursor,
        dynamic_partitions_requests=[frontier_batches.build_add_request(keys)] if keys else [],
    )


@sensor(
    job=crawl_intake_job,
    minimum_interval_seconds=1,
    default_status=DefaultSensorStatus.RUNNING,
    description="Registers crawls submitted to the seeds topic (an intake run for those that read sitemaps).",
)
def seeds_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    try:
        plan = plan_seeds(read_topic(KafkaBus.from_settings(settings), settings.seeds_topic, context.cursor))
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    if plan.lost:
        context.log.warning("the seeds topic lost its log: crawls submitted but not yet registered are gone")
    if plan.run_key is None:
        return SensorResult(skip_reason="no new crawl requests", cursor=plan.cursor)
    # Registered here, at once, as the intake run would (no run start between a submission and its
    # first batch); what needs the network (sitemaps) or is very large, or what the lake or the
    # broker refused, goes to an intake run, which registers it idempotently.
    intake = SeedIntake(KafkaBus.from_settings(settings), CrawlStore.from_settings(settings))
    report, rest, why = intake.register_here([OffsetRange.parse(key) for key in plan.range_keys])
    done = plan.range_keys[:len(plan.range_keys) - len(rest)]
    if rest:
        context.log.info(f"seeds {', '.join(r.key for r in rest)} go to an intake run: {why}")
    if done:
        context.log.info(f"registered {report.crawls}, {report.admitted} seeds admitted")
    for note in report.notes:
        context.log.warning(note)
    if report.dead_letters:
        context.log.warning(f"{report.dead_letters} crawl requests could not be registered: see the dead-letter topic")
    return SensorResult(
        run_requests=[RunRequest(run_key=plan.run_key, run_config={"ops": {"crawls": {"config": {
            "seed_ranges": [r.key for r in rest]}}}})] if rest else [],
        asset_events=[crawls_materialization(report, done)] if done else [],
        cursor=plan.cursor,
    )


@sensor(
    job=crawl_control_job,
    minimum_interval_seconds=5,
    default_status=DefaultSensorStatus.RUNNING,
    description="Applies control commands (cancel, pause, resume) put on the control topic.",
)
def control_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    try:
        plan = plan_seeds(read_topic(KafkaBus.from_settings(settings), settings.control_topic, context.cursor))
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    if plan.run_key is None:
        return SensorResult(skip_reason="no new control commands", cursor=plan.cursor)
    return SensorResult(
        run_requests=[RunRequest(run_key=plan.run_key.replace("seeds-", "control-", 1),
                                 run_config={"ops": {"apply_crawl_controls": {
                                     "config": {"control_ranges": plan.range_keys}}}})],
        cursor=plan.cursor,
    )
