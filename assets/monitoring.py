"""The ``crawl_progress`` asset: observed, never materialised, so the UI plots crawl progress.

``crawl_progress_sensor`` (``sensors/monitoring.py``) records one ``AssetObservation`` of it
every ``CRAWL_MONITOR_INTERVAL`` seconds; the numbers in its metadata (totals, per crawl, and
the frontier's Kafka lag, see :mod:`crawl_platform.monitoring.progress`) are plotted over time
in the asset's Plots tab. Batch-run figures stay on the ``pages`` and ``frontier`` materialisations.
"""

from dagster import AssetKey, AssetSpec

CRAWL_PROGRESS = AssetKey("crawl_progress")

crawl_progress = AssetSpec(
    CRAWL_PROGRESS,
    group_name="monitoring",
    description="Progress of every crawl over time, observed by crawl_progress_sensor: pending, fetched, "
    "failed, pages/s (total and <crawl_id>/...), and frontier_lag (frontier messages not yet handed "
    "to a batch run, per partition frontier_lag_p<N>). See the Plots tab.",
)
