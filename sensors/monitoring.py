"""Records crawl progress as observations of ``crawl_progress``, which the UI plots over time.

Every ``CRAWL_MONITOR_INTERVAL`` seconds (the sensor wakes every 15 s and skips until then) it
reads each crawl's status from the lake and the frontier topic's end offsets from Kafka, and the
frontier sensor's cursor from the instance: the lag is what the topic holds past the offsets
already handed to batch runs. The figures are the engine's
(:func:`crawl_platform.monitoring.progress.progress_figures`); the cursor keeps the previous
tick's counts for the rates. With Kafka unreachable the lag figures are left out of that point.
"""

import time

from dagster import (
    AssetObservation,
    DagsterInstance,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from crawl_platform.bus.base import BusError
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.offsets import decode_cursor
from crawl_platform.config import Settings
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.monitoring.progress import ProgressState, frontier_lag, progress_figures
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.assets.monitoring import CRAWL_PROGRESS
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource

FRONTIER_SENSOR = "frontier_sensor"


def frontier_sensor_cursor(instance: DagsterInstance) -> str | None:
    """The frontier sensor's stored cursor (the offsets it handed to batch runs), None before its
    first tick (or on an instance without schedule storage); with several code locations, the one
    that ticked last. Instigator names are unique among a location's sensors and schedules."""
    if instance.schedule_storage is None:
        return None
    states = [s for s in instance.all_instigator_state()
              if s.name == FRONTIER_SENSOR and s.instigator_data is not None]
    if not states:
        return None
    latest = max(states, key=lambda s: getattr(s.instigator_data, "last_tick_timestamp", None) or 0.0)
    return getattr(latest.instigator_data, "cursor", None)


def _lag(settings: Settings, instance: DagsterInstance) -> dict[int, int] | None:
    bus = KafkaBus.from_settings(settings)
    try:
        watermarks = bus.watermarks(settings.frontier_topic)
    except BusError:
        return None
    finally:
        bus.close()
    offsets, _epoch = decode_cursor(frontier_sensor_cursor(instance))
    return frontier_lag(watermarks, offsets)


@sensor(
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
    description="Observes crawl_progress every CRAWL_MONITOR_INTERVAL seconds: per-crawl pending, fetched, "
    "failed, pages/s and the frontier's Kafka lag, plotted in the asset's Plots tab.",
)
def crawl_progress_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    previous = ProgressState.decode(context.cursor)
    now = time.time()
    if previous.at is not None and now - previous.at < settings.monitor_interval_s - 1:
        return SkipReason(f"next observation {settings.monitor_interval_s} s after the last")
    store = CrawlStore.from_settings(settings)
    if not store.exists():
        return SkipReason("no lake yet")
    figures, state = progress_figures(FrontierReadModel(store).status(), _lag(settings, context.instance),
                                      previous, now)
    return SensorResult(
        asset_events=[AssetObservation(asset_key=CRAWL_PROGRESS, metadata=dict(figures))],
        cursor=state.encode(),
    )
