"""Schedule for recurring crawls: every crawl family is crawled again daily (off by default).

Turn it on in the UI (Automation → recrawl_daily). Each tick submits, through the Launchpad job,
one new pass per family with the id ``<base>@<YYYYMMDD>`` and every option of its latest pass; the
plan is the engine's (:func:`crawl_platform.pipeline.recrawl.plan_recrawls`). Per-crawl schedules
(``--every``/``--cron``) are the ``recurring_crawls`` sensor's (:mod:`.recurring`).
"""

from dagster import DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from crawl_platform.pipeline.recrawl import plan_recrawls
from crawl_platform_dagster.assets.intake import request_run_config, submit_crawl_job
from crawl_platform_dagster.resources.store import CrawlStoreResource


@schedule(job=submit_crawl_job, cron_schedule="0 3 * * *", execution_timezone="UTC",
          default_status=DefaultScheduleStatus.STOPPED,
          description="Crawl every site again at 03:00 UTC; changed pages get a new version.")
def recrawl_daily(context: ScheduleEvaluationContext, crawl_store: CrawlStoreResource) -> list[RunRequest] | SkipReason:
    day = context.scheduled_execution_time.date()
    plans = plan_recrawls(crawl_store.store(), day)
    if not plans:
        return SkipReason("no crawls registered yet")
    return [RunRequest(run_key=plan.crawl_id, run_config=request_run_config(plan)) for plan in plans]
