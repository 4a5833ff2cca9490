"""Progress figures per crawl between two ticks, frontier lag, and the batch retention rule."""

from datetime import UTC, datetime

from crawl_platform.frontier.read_model import CrawlStatus
from crawl_platform.monitoring.progress import ProgressState, frontier_lag, progress_figures
from crawl_platform.monitoring.retention import expired_batches, retention_cutoff

T0 = datetime(2026, 1, 1, 12, 0).replace(tzinfo=UTC).timestamp()
REGISTERED = datetime(2026, 1, 1, 11, 0)


def _status(crawl_id, pending, fetched, failed=0, registered=REGISTERED):
    return CrawlStatus(crawl_id, pending, fetched, failed, 0, registered, registered)


def test_rates_come_from_progress_between_ticks_and_a_finished_crawl_gets_its_last_point():
    previous = ProgressState(T0, {"a": 100, "b": 40})
    statuses = [_status("a", 50, 150, 10), _status("b", 0, 50), _status("old", 0, 900)]
    figures, state = progress_figures(statuses, {0: 5, 1: 0}, previous, T0 + 60)
    assert figures == {
        "crawls_active": 2, "pending": 50, "fetched": 1100, "failed": 10,
        "a/pending": 50, "a/fetched": 150, "a/failed": 10, "a/pages_per_second": 1.0,
        "b/pending": 0, "b/fetched": 50, "b/failed": 0, "b/pages_per_second": round(10 / 60, 2),
        "pages_per_second": round(70 / 60, 2),
        "frontier_lag": 5, "frontier_lag_p0": 5, "frontier_lag_p1": 0,
    }
    assert state == ProgressState(T0 + 60, {"a": 160})  # "b" finished: not tracked any more
    assert ProgressState.decode(state.encode()) == state
    again, _ = progress_figures(statuses, None, state, T0 + 120)
    assert "b/pending" not in again
    assert "frontier_lag" not in again  # Kafka unreachable: a gap, not a zero
    assert again["pages_per_second"] == 0.0


def test_a_crawl_registered_since_the_last_tick_counts_all_its_progress():
    late = datetime(2026, 1, 1, 12, 0, 30)
    figures, _ = progress_figures([_status("new", 10, 30, registered=late)], {}, ProgressState(T0, {}), T0 + 60)
    assert figures["new/pages_per_second"] == 0.5


def test_lag_counts_from_the_cursor_or_the_low_watermark():
    assert frontier_lag({0: (0, 10), 1: (5, 8), 2: (0, 3)}, {0: 4, 1: 2, 2: 7}) == {0: 6, 1: 3, 2: 0}


def test_expired_batches_keep_recent_and_just_added_ones():
    keys = ["k0", "k1", "k2", "k3", "k4", "k5", "k6"]
    seen = {"k0", "k2", "k3", "k4", "k5"}  # k1 never ran, k6 was just added
    recent = {"k3", "k5"}  # k3 was materialised again lately
    assert expired_batches(keys, recent, seen) == ["k0", "k1", "k2", "k4"]
    assert expired_batches(keys, set(seen), seen) == []
    assert retention_cutoff(1_000_000.0, 7) == 1_000_000.0 - 7 * 86_400
    assert retention_cutoff(1_000_000.0, 0) is None
