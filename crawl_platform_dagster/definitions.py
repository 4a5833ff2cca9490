"""Assembles the Dagster ``Definitions`` of crawl-platform; ``workspace.yaml`` points here."""

from dagster import Definitions

from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.control import (
    cancel_crawl_job,
    crawl_control_job,
    pause_crawl_job,
    resume_crawl_job,
)
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.exports import exports
from crawl_platform_dagster.assets.intake import crawls, submit_crawl_job
from crawl_platform_dagster.assets.jobs import (
    crawl_batch_celery_job,
    crawl_batch_job,
    crawl_intake_job,
    crawl_quality_job,
)
from crawl_platform_dagster.assets.lake import lake_backup_job, lake_maintenance, lake_maintenance_job
from crawl_platform_dagster.assets.markdown import documents_markdown
from crawl_platform_dagster.assets.monitoring import crawl_progress
from crawl_platform_dagster.assets.near_duplicates import near_duplicates
from crawl_platform_dagster.assets.records import records, records_checks, records_job
from crawl_platform_dagster.assets.recurring import recurring_crawls_on_schedule
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.handoff import HANDOFF_IO_MANAGER_KEY, HandoffIOManager
from crawl_platform_dagster.resources.store import CrawlStoreResource
from crawl_platform_dagster.sensors.alerts import quality_alert_sensor, run_failure_alert_sensor, stall_alert_sensor
from crawl_platform_dagster.sensors.content import content_automation_sensor
from crawl_platform_dagster.sensors.kafka import control_sensor, frontier_sensor, seeds_sensor
from crawl_platform_dagster.sensors.lake import lake_maintenance_daily
from crawl_platform_dagster.sensors.monitoring import crawl_progress_sensor
from crawl_platform_dagster.sensors.quality import quality_sensor
from crawl_platform_dagster.sensors.records import records_sensor
from crawl_platform_dagster.sensors.recurring import recurring_crawls
from crawl_platform_dagster.sensors.retention import batch_retention_sensor
from crawl_platform_dagster.sensors.schedules import recrawl_daily

defs = Definitions(
    assets=[crawls, crawl_batch, frontier, lake_maintenance, exports, records, crawl_progress, near_duplicates,
            documents_markdown],
    asset_checks=[*quality_checks, *records_checks, recurring_crawls_on_schedule],
    jobs=[crawl_batch_job, crawl_batch_celery_job, crawl_intake_job, crawl_quality_job, submit_crawl_job,
          lake_maintenance_job, lake_backup_job, records_job, crawl_control_job, cancel_crawl_job, pause_crawl_job,
          resume_crawl_job],
    sensors=[frontier_sensor, seeds_sensor, quality_sensor, records_sensor, control_sensor, recurring_crawls,
             run_failure_alert_sensor, quality_alert_sensor, stall_alert_sensor, crawl_progress_sensor,
             batch_retention_sensor, content_automation_sensor],
    schedules=[recrawl_daily, lake_maintenance_daily],
    resources={"crawl": CrawlSettingsResource(), "crawl_store": CrawlStoreResource(),
               HANDOFF_IO_MANAGER_KEY: HandoffIOManager()},
)
