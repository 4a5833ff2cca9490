"""Removes batch partitions past retention from Dagster; their rows stay in the lake.

Every 10 minutes it walks the ``frontier_batches`` partitions oldest first, 500 at a time, and
deletes (``instance.delete_dynamic_partition``) those whose last run, the latest planned or
recorded materialisation of ``pages`` for the partition, is older than
``CRAWL_BATCH_RETENTION_DAYS`` (default 7, Kafka's default retention: an older batch's offsets
are gone from the log, so it cannot be run again anyway). The rule is the engine's
(:func:`crawl_platform.monitoring.retention.expired_batches`). It stops at the first page with
nothing to remove and at :data:`MAX_PER_TICK` removals, so a months-old backlog is worked off over
a few ticks. Nothing in the lake is touched: ``pages.batch_id`` and ``batch_items`` keep the history.
"""

import time

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from crawl_platform.monitoring.retention import expired_batches, retention_cutoff
from crawl_platform_dagster.assets.crawl_batch import frontier_batches
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource

PAGES = AssetKey("pages")
PAGE_SIZE = 500
MAX_PER_TICK = 5_000
BATCHES: str = frontier_batches.name or "frontier_batches"
_RUN_EVENTS = (DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_MATERIALIZATION_PLANNED)


def first_event_after(instance: DagsterInstance, cutoff: float) -> int | None:
    """The storage id of the first run event of ``pages`` at or after ``cutoff``: a partition whose
    latest event is below it last ran before the cutoff. None when nothing ran since."""
    records_filter = AssetRecordsFilter(asset_key=PAGES, after_timestamp=cutoff)
    firsts = [instance.fetch_materializations(records_filter, limit=1, ascending=True).records,
              instance.fetch_planned_materializations(records_filter, limit=1, ascending=True).records]
    ids = [records[0].storage_id for records in firsts if records]
    return min(ids) if ids else None


def latest_run_events(instance: DagsterInstance, keys: list[str]) -> dict[str, int]:
    """Each partition's latest run event (storage id), for the partitions that have one."""
    latest: dict[str, int] = {}
    for event_type in _RUN_EVENTS:
        for key, storage_id in instance.get_latest_storage_id_by_partition(PAGES, event_type, set(keys)).items():
            latest[key] = max(storage_id, latest.get(key, 0))
    return latest


def remove_expired_batches(instance: DagsterInstance, cutoff: float, limit: int = MAX_PER_TICK) -> int:
    """Delete up to ``limit`` batch partitions whose last run is before ``cutoff``; returns how many."""
    boundary = first_event_after(instance, cutoff)
    removed, cursor = 0, None
    while removed < limit:
        page = instance.get_paginated_dynamic_partitions(BATCHES, PAGE_SIZE, ascending=True,
                                                         cursor=cursor)
        keys = list(page.results)
        if not keys:
            break
        latest = latest_run_events(instance, keys)
        recent = {k for k, storage_id in latest.items() if boundary is not None and storage_id >= boundary}
        expired = expired_batches(keys, recent, set(latest))[: limit - removed]
        for key in expired:
            instance.delete_dynamic_partition(BATCHES, key)
        removed += len(expired)
        if not expired or not page.has_more:
            break
        cursor = page.cursor
    return removed


def now() -> float:
    """Seconds since the epoch: the clock Dagster stamps run events with (tests move it)."""
    return time.time()


@sensor(
    minimum_interval_seconds=600,
    default_status=DefaultSensorStatus.RUNNING,
    description="Removes frontier_batches partitions whose last run is older than CRAWL_BATCH_RETENTION_DAYS "
    "(their rows stay in the lake).",
)
def batch_retention_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SkipReason:
    days = crawl.settings().batch_retention_days
    cutoff = retention_cutoff(now(), days)
    if cutoff is None:
        return SkipReason("CRAWL_BATCH_RETENTION_DAYS is 0: every batch partition is kept")
    removed = remove_expired_batches(context.instance, cutoff)
    if removed:
        context.log.info(f"removed {removed} batch partitions older than {days:g} days")
    return SkipReason(f"removed {removed} batch partitions whose last run is older than {days:g} days")
