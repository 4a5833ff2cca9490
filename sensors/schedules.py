"""Schedule for recurring crawls: every crawl family is crawled again daily (off by default).

Turn it on in the UI (Automation → recrawl_daily). Each tick submits, through the Launchpad job,
one new crawl per family with the id ``<base>@<YYYYMMDD>``; the plan is the engine's
(:func:`crawl_platform.pipeline.recrawl.plan_recrawls`).
"""

from dagster import DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from crawl_platform.pipeline.recrawl import plan_recrawls
from crawl_platform_dagster.assets.intake import submit_crawl_job
from crawl_platform_dagster.resources.store import CrawlStoreResource


@schedule(job=submit_crawl_job, cron_schedule="0 3 * * *", execution_timezone="UTC",
          default_status=DefaultScheduleStatus.STOPPED,
          description="Crawl every site again at 03:00 UTC; changed pages get a new version.")
def recrawl_daily(context: ScheduleEvaluationContext, crawl_store: CrawlStoreResource) -> list[RunRequest] | SkipReason:
    day = context.scheduled_execution_time.date()
    plans = plan_recrawls(crawl_store.store(), day)
    if not plans:
        return SkipReason("no crawls registered yet")
    return [
        RunRequest(run_key=plan.crawl_id, run_config={"ops": {"submit_crawl_request": {"config": {
            "seeds": list(plan.seeds), "crawl_id": plan.crawl_id, "max_pages": plan.max_pages,
            "max_depth": plan.max_depth, "scope": plan.scope}}}})
        for plan in plans
    ]
