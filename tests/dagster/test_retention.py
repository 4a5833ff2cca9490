"""Months of batches: the retention sensor keeps the number of batch partitions bounded, keeps a
batch materialised again lately, and leaves every landed row in the lake."""

from datetime import UTC, datetime, timedelta

from dagster import AssetMaterialization, build_sensor_context, materialize
from dagster._core.test_utils import freeze_time

from crawl_platform.bus.offsets import OffsetRange, batch_key, plan_batches
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors import retention
from crawl_platform_dagster.sensors.retention import batch_retention_sensor
from tests.dagster.conftest import RESOURCES

BATCHES_PER_DAY = 12
DAYS = 90
START = datetime(2026, 1, 1, tzinfo=UTC)


def _land_real_batches(bus, crawl_env, site, instance) -> list[str]:
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="old-crawl", max_depth=1))
    seeds = plan_batches(bus.watermarks(crawl_env.seeds_topic), {}, 1000, 10)
    assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
        "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges]}}}}).success
    keys, cursor = [], {}
    for _level in range(2):
        plan = plan_batches(bus.watermarks(crawl_env.frontier_topic), cursor, 1000, 10)
        cursor = plan.cursor
        for batch in plan.batches:
            key = batch_key(0, batch)
            instance.add_dynamic_partitions("frontier_batches", [key])
            assert materialize([crawl_batch, frontier], partition_key=key, instance=instance,
                               resources=RESOURCES).success
            keys.append(key)
    return keys


def _lake_rows(store) -> dict[str, int]:
    return {table: store.query(f"SELECT count(*) FROM {table}")[0][0]
            for table in ("pages", "documents", "links", "frontier", "batch_items")}


def _simulated_batch(instance, day: int, n: int, *, ran: bool = True) -> str:
    """A batch of day ``day``: its partition, and (if it ran) its landing recorded as a pages
    materialisation at that time."""
    key = batch_key(0, OffsetRange(n % 8, 1000 * n, 1000 * n + 50))
    instance.add_dynamic_partitions("frontier_batches", [key])
    if ran:
        instance.report_runless_asset_event(AssetMaterialization("pages", partition=key))
    return key


def test_months_of_batches_stay_bounded_and_their_rows_stay_in_the_lake(crawl_env, bus, site, store, instance,
                                                                        monkeypatch):
    monkeypatch.setenv("CRAWL_BATCH_RETENTION_DAYS", "7")
    with freeze_time(START):
        real = _land_real_batches(bus, crawl_env, site, instance)
    rows = _lake_rows(store)
    assert rows["pages"] > 1
    context = {"resources": {"crawl": CrawlSettingsResource()}}
    counts, n, never_ran, rematerialised = [], 0, [], None
    for day in range(1, DAYS + 1):
        for hour in range(BATCHES_PER_DAY):
            with freeze_time(START + timedelta(days=day, hours=2 * hour)):
                n += 1
                # Every 50th batch's run never got anywhere (no event at all).
                key = _simulated_batch(instance, day, n, ran=n % 50 != 0)
                if n % 50 == 0:
                    never_ran.append((day, key))
                if day == DAYS - 10 and hour == 0:
                    rematerialised = key
        if day == DAYS - 4:  # someone materialises a batch of 6 days ago again
            with freeze_time(START + timedelta(days=day, hours=1)):
                instance.report_runless_asset_event(AssetMaterialization("pages", partition=rematerialised))
        evening = START + timedelta(days=day, hours=23, minutes=59)
        monkeypatch.setattr(retention, "now", evening.timestamp)
        with freeze_time(evening):
            batch_retention_sensor(build_sensor_context(instance=instance, **context))
        counts.append(len(instance.get_dynamic_partitions("frontier_batches")))

    assert n == DAYS * BATCHES_PER_DAY
    # Without retention: 1,080 partitions and growing. With it: 7 days of batches, plus the day
    # under way, plus the batch materialised again.
    assert max(counts) <= 8 * BATCHES_PER_DAY + 1
    left = instance.get_dynamic_partitions("frontier_batches")
    assert len(left) == 7 * BATCHES_PER_DAY + 1
    assert rematerialised in left
    assert not set(real) & set(left)  # the real batches of day 0 are gone from Dagster ...
    assert _lake_rows(store) == rows  # ... and every row they landed is still in the lake
    assert store.query("SELECT count(DISTINCT batch_id) FROM batch_items")[0][0] == len(real)
    assert [key for day, key in never_ran if day < DAYS - 7 and key in left] == []
