"""Assembles the Dagster ``Definitions`` of crawl-platform; ``workspace.yaml`` points here."""

from dagster import Definitions

from crawl_platform_dagster.assets.checks import quality_checks
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
from crawl_platform_dagster.assets.near_duplicates import near_duplicates
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.handoff import HANDOFF_IO_MANAGER_KEY, HandoffIOManager
from crawl_platform_dagster.resources.store import CrawlStoreResource
from crawl_platform_dagster.sensors.content import content_automation_sensor
from crawl_platform_dagster.sensors.kafka import frontier_sensor, seeds_sensor
from crawl_platform_dagster.sensors.lake import lake_maintenance_daily
from crawl_platform_dagster.sensors.quality import quality_sensor
from crawl_platform_dagster.sensors.schedules import recrawl_daily

defs = Definitions(
    assets=[crawls, crawl_batch, frontier, lake_maintenance, exports, near_duplicates, documents_markdown],
    asset_checks=quality_checks,
    jobs=[crawl_batch_job, crawl_batch_celery_job, crawl_intake_job, crawl_quality_job, submit_crawl_job,
          lake_maintenance_job, lake_backup_job],
    sensors=[frontier_sensor, seeds_sensor, quality_sensor, content_automation_sensor],
    schedules=[recrawl_daily, lake_maintenance_daily],
    resources={"crawl": CrawlSettingsResource(), "crawl_store": CrawlStoreResource(),
               HANDOFF_IO_MANAGER_KEY: HandoffIOManager()},
)
