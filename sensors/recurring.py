"""The one sensor of per-crawl schedules: ``recurring_crawls`` submits the passes that are due.

Every minute it asks the engine which scheduled crawl families are due
(:func:`crawl_platform.pipeline.schedules.plan_due_passes`) and requests one ``submit_crawl_job``
run per due pass, with run key = the pass id (``<family>@<YYYYMMDDTHHMM>``) and every option of the
latest pass, so the UI lists each pass it started. Each tick also reports the freshness check
``recurring_crawls_on_schedule`` (:mod:`crawl_platform_dagster.assets.recurring`). It is on by
default: it only acts on crawls someone gave a schedule. The ``recrawl_daily`` schedule (off by
default, :mod:`.schedules`) resubmits every crawl daily.
"""

from datetime import UTC, datetime

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SensorResult, sensor

from crawl_platform.frontier.schedules import base_id
from crawl_platform.pipeline.schedules import plan_due_passes
from crawl_platform_dagster.assets.intake import request_run_config, submit_crawl_job
from crawl_platform_dagster.assets.recurring import freshness_evaluation
from crawl_platform_dagster.resources.store import CrawlStoreResource


@sensor(job=submit_crawl_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING,
        description="Submit the passes of recurring crawls (--every/--cron) that are due.")
def recurring_crawls(context: SensorEvaluationContext, crawl_store: CrawlStoreResource) -> SensorResult:
    now = datetime.now(UTC).replace(tzinfo=None)
    plan = plan_due_passes(crawl_store.store(), now)
    if not plan.families:
        return SensorResult(skip_reason="no recurring crawls")
    runs = [RunRequest(run_key=p.crawl_id, run_config=request_run_config(p), tags={"crawl/family": base_id(p.crawl_id)})
            for p in plan.passes]
    return SensorResult(run_requests=runs, asset_events=[freshness_evaluation(plan, now)],
                        skip_reason=None if runs else "no recurring crawl is due")
