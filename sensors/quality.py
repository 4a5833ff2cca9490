"""Sensor that runs the Great Expectations checks over batches as they land, off the crawl's path.

Every ``pages`` materialisation since its cursor (a Dagster event storage id) is a landed batch;
the sensor starts one ``crawl_quality_job`` run over all of them, at most every 30 s and never
while the previous one is still going. Batch runs thus never import Great Expectations (seconds
of CPU per process), and every landed batch is still checked, in landing order.

While batch runs are going the checks wait, for at most ``CRAWL_QUALITY_MAX_WAIT_S`` after the
oldest unchecked batch landed: a quality run imports a large library, and its memory beside a
batch run's landing would set the peak of the whole platform's memory on a long crawl (see
docs/benchmarks.md).
"""

import time

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

from crawl_platform_dagster.assets.jobs import crawl_batch_celery_job, crawl_batch_job, crawl_quality_job
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
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
    description="Checks newly landed batches with the Great Expectations suites (one run for many batches); "
    "waits while batch runs are going, for at most CRAWL_QUALITY_MAX_WAIT_S.",
)
def quality_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    instance = context.instance
    if instance.get_runs_count(RunsFilter(job_name=crawl_quality_job.name, statuses=ACTIVE_RUN_STATUSES)):
        return SkipReason("the previous quality run is still going")
    after = int(context.cursor) if context.cursor and context.cursor.isdigit() else None
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("pages"), after_storage_id=after),
        limit=MAX_BATCHES_PER_RUN, ascending=True,
    )
    if not result.records:
        return SkipReason("no batch landed since the last quality run")
    waited = time.time() - result.records[0].timestamp
    max_wait = crawl.settings().quality_max_wait_s
    if waited < max_wait and any(  # batch runs of either executor (CRAWL_EXECUTOR)
            instance.get_runs_count(RunsFilter(job_name=job.name, statuses=ACTIVE_RUN_STATUSES))
            for job in (crawl_batch_job, crawl_batch_celery_job)):
        return SkipReason(f"batch runs are going: checks wait (oldest unchecked batch landed {waited:.0f} s "
                          f"ago; at most {max_wait:.0f} s, CRAWL_QUALITY_MAX_WAIT_S)")
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
