"""Schedule of lake maintenance: ``lake_maintenance_job`` every day at 04:00 UTC, on by default.

On by default, unlike ``recrawl_daily``: maintenance costs seconds and touches no website, and a
lake left alone slows down, since every landed batch adds small files that every query opens and
a snapshot the catalog keeps. 04:00 UTC is an hour after ``recrawl_daily`` submits its crawls; the
run takes the writer pool, so landing steps wait for it in Dagster, not on the lake's lock. Turn it
off under Automation when you run maintenance yourself.
"""

from dagster import DefaultScheduleStatus, ScheduleDefinition

from crawl_platform_dagster.assets.lake import lake_maintenance_job

lake_maintenance_daily = ScheduleDefinition(
    name="lake_maintenance_daily",
    job=lake_maintenance_job,
    cron_schedule="0 4 * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Compact the lake, expire snapshots older than CRAWL_LAKE_RETENTION_DAYS and remove "
    "unreferenced files, at 04:00 UTC.",
)
