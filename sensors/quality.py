"""Sensor that runs the Great Expectations checks over batches as they land, off the crawl's path.

Every ``pages`` materialisation since its cursor (a Dagster event storage id) is a landed batch;
the sensor starts one ``crawl_quality_job`` run over all of them, at most every 30 s and never
while the previous one is still going. Batch runs thus never import Great Expectations (about 4 s
of CPU per process), and every landed batch is still checked, in landing order.
"""

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from crawl_platform_dagster.assets.jobs import crawl_quality_job
from crawl_platform_dagster.sensors.kafka import ACTIVE_RUN_STATUSES

MAX_BATCHES_PER_RUN = 500


def check_run_config(batches: list[str]) -> dict[str, object]:
    """Run config of a quality run over ``batches`` (both checks read the same ones)."""
    op_config = {"config": {"batches": batches}}
    return {"ops": {"pages_pages_quality": op_config, "documents_documents_quality": op_config}}


@sensor(
    job=crawl_quality_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Checks newly landed batches with the Great Expectations suites (one run for many batches).",
)
def quality_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    if context.instance.get_runs_count(RunsFilter(job_name=crawl_quality_job.name, statuses=ACTIVE_RUN_STATUSES)):
        return SkipReason("the previous quality run is still going")
    after = int(context.cursor) if context.cursor and context.cursor.isdigit() else None
    result = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("pages"), after_storage_id=after),
        limit=MAX_BATCHES_PER_RUN, ascending=True,
    )
    if not result.records:
        return SkipReason("no batch landed since the last quality run")
    last = result.records[-1].storage_id
    batches = sorted({
        r.partition_key for r in result.records
        if r.partition_key and not (r.asset_materialization and r.asset_materialization.metadata.get("lost_batch"))
    })
    if not batches:
        return SensorResult(skip_reason="only lost batches landed", cursor=str(last))
    return SensorResult(
        run_requests=[RunRequest(run_key=f"quality-{result.records[0].storage_id}-{last}",
                                 run_config=check_run_config(batches),
                                 tags={"crawl/checked_batches": str(len(batches))})],
        cursor=str(last),
    )
