"""Sensors that turn new offsets on the Kafka seeds, frontier and control topics into runs.

Each tick asks the engine's crawl coordinator what to run next
(:class:`crawl_platform.pipeline.coordinator.CrawlCoordinator`: ``frontier_turn``, ``seeds_turn``,
``control_turn``) and maps the answer to ``RunRequest``s: every rule (batch size, priorities,
backpressure, broker-loss epochs and requeues, the idle sweep, which frontier partitions a batch
reads, where the cursor stands against what landed) is the engine's. What is Dagster's: the run
queue the coordinator asks (:class:`_InstanceRunQueue`), the partitions it adds, run keys, the run
tags that the run queue limits to one run per frontier partition (``dagster.yaml``), and the job and
executor config.
"""

from collections.abc import Collection, Sequence

from dagster import (
    AddDynamicPartitionsRequest,
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
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.config import Settings
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.planning import FrontierPlan, PlannedBatch, QueuedRuns
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


class _InstanceRunQueue:
    """The instance's run queue, as the crawl coordinator asks it
    (:class:`~crawl_platform.pipeline.coordinator.RunQueue`)."""

    def __init__(self, context: SensorEvaluationContext, batch_job_name: str) -> None:
        self.context = context
        self.batch_job_name = batch_job_name

    def held_partitions(self) -> frozenset[int]:
        """Frontier partitions a queued or running batch run holds (its ``crawl/partitions`` tag)."""
        runs = self.context.instance.get_runs(RunsFilter(job_name=self.batch_job_name, statuses=ACTIVE_RUN_STATUSES))
        return frozenset(int(p) for run in runs for p in run.tags.get("crawl/partitions", "").split(",") if p)

    def unlimited_partitions(self, partitions: Collection[int]) -> str | None:
        """A frontier partition the run queue does not limit to one run at a time (a topic larger
        than ``dagster.yaml`` was written for), whose hosts two runs could then fetch at once.
        None without a run queue (an in-process instance runs at once)."""
        queue = self.context.instance.get_concurrency_config().run_queue_config
        if queue is None:
            return None
        limited = limited_partitions(queue.tag_concurrency_limits)
        missing = sorted(set(partitions) - limited)
        if not missing:
            return None
        return (f"frontier partitions {', '.join(map(str, missing))} have no one-run-at-a-time limit in "
                f"dagster.yaml (it limits {', '.join(map(str, sorted(limited))) or 'none'}): "
                f"{missing_limits_hint(missing)}, or write it anew")

    def counts(self) -> QueuedRuns:
        runs = self.context.instance
        waiting = runs.get_runs_count(RunsFilter(job_name=self.batch_job_name, statuses=_WAITING))
        jobs = [crawl_batch_job.name, crawl_batch_celery_job.name, crawl_intake_job.name]
        in_flight = sum(runs.get_runs_count(RunsFilter(job_name=job, statuses=ACTIVE_RUN_STATUSES)) for job in jobs)
        return QueuedRuns(waiting, in_flight)


class _PlannedPartitions:
    """The batch keys a tick plans, added as partitions of ``frontier_batches`` with its result
    (the coordinator's :class:`~crawl_platform.pipeline.coordinator.PartitionRegistry`)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def add_partitions(self, keys: Sequence[str]) -> None:
        self.keys += keys

    def requests(self) -> list[AddDynamicPartitionsRequest]:
        return [frontier_batches.build_add_request(self.keys)] if self.keys else []


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
    partitions = _PlannedPartitions()
    try:
        turn = crawl.coordinator().frontier_turn(context.cursor, _InstanceRunQueue(context, batch_job.name),
                                                 partitions)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    if turn.plan is None:
        return SensorResult(skip_reason=turn.refused)  # the cursor stays: nothing is planned, nothing skipped
    plan = turn.plan
    if turn.events.batches:
        context.log.info(f"page events of {turn.events.batches} unrecorded batches published again: "
                         f"{turn.events.events} confirmed, {turn.events.unconfirmed} not")
    for requeue in plan.requeues:
        context.log.warning(requeue.reason)
    requests = [RunRequest(run_key=r.key, job_name=crawl_intake_job.name, run_config=_REQUEUE_CONFIG)
                for r in plan.requeues]
    requests += _batch_requests(plan, settings)
    if not requests:
        reason = f"{plan.skip_reason} ({turn.queue.waiting} waiting)" if plan.backlog else plan.skip_reason
        return SensorResult(skip_reason=reason, cursor=plan.cursor)
    return SensorResult(run_requests=requests, cursor=plan.cursor, dynamic_partitions_requests=partitions.requests())


@sensor(
    job=crawl_intake_job,
    minimum_interval_seconds=1,
    default_status=DefaultSensorStatus.RUNNING,
    description="Registers crawls submitted to the seeds topic (an intake run for those that read sitemaps).",
)
def seeds_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    coordinator = crawl.coordinator()
    try:
        plan = coordinator.seeds_turn(context.cursor)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    if plan.lost:
        context.log.warning("the seeds topic lost its log: crawls submitted but not yet registered are gone")
    if plan.run_key is None:
        return SensorResult(skip_reason="no new crawl requests", cursor=plan.cursor)
    # Registered here, at once, as the intake run would (no run start between a submission and its
    # first batch); what needs the network (sitemaps) or is very large, or what the lake or the
    # broker refused, goes to an intake run, which registers it idempotently.
    intake = SeedIntake(coordinator.bus, coordinator.store)
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
    try:
        plan = crawl.coordinator().control_turn(context.cursor)
    except BusError as err:
        return SkipReason(f"Kafka unavailable: {err}")
    if plan.run_key is None:
        return SensorResult(skip_reason="no new control commands", cursor=plan.cursor)
    return SensorResult(
        run_requests=[RunRequest(run_key=plan.run_key, run_config={"ops": {"apply_crawl_controls": {
            "config": {"control_ranges": plan.range_keys}}}})],
        cursor=plan.cursor,
    )
