"""Crawl control through the running platform: ``crawl-platform pause`` stops a crawl mid-way under the
Dagster daemon, inside the batch already fetching it (its fetch step watches the crawl's state), a
resume put on the control topic by another producer is applied by the daemon's control sensor, the
crawl lands exactly its site, and a cancelled crawl stops for good."""

import time

import pytest

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.pipeline.control import build_control, submit_control
from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import assert_landed_exactly_once, cli

pytestmark = pytest.mark.e2e(seconds=330)


def _pages(store: CrawlStore, crawl_id: str) -> int:
    return store.query("SELECT count(*) FROM pages WHERE crawl_id = ?", [crawl_id])[0][0]


def _state(store: CrawlStore, crawl_id: str) -> str:
    return store.query("SELECT state FROM crawls WHERE crawl_id = ?", [crawl_id])[0][0]


def _until(predicate, timeout_s: float = 450.0, store: CrawlStore | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        seen = store.query("SELECT crawl_id, state, count(*) FROM frontier GROUP BY ALL ORDER BY ALL") if store else ""
        assert time.monotonic() < deadline, f"timed out; frontier: {seen}"
        time.sleep(0.5)


def _quiet(server, quiet_s: float = 3.0, timeout_s: float = 180.0) -> int:
    """Wait until ``server`` has had no request for ``quiet_s``; how many it had by then."""
    deadline = time.monotonic() + timeout_s
    count, changed = len(server.requests), time.monotonic()
    while time.monotonic() - changed < quiet_s:
        assert time.monotonic() < deadline, "the site never went quiet"
        time.sleep(0.25)
        if len(server.requests) != count:
            count, changed = len(server.requests), time.monotonic()
    return count


def _page_requests(server) -> int:
    return sum(1 for r in server.requests if r.path != "/robots.txt")


def test_pause_then_resume_from_the_topic_then_cancel_under_the_daemon(start_platform):
    # Batches big enough that one level of the site is one batch, fetched for many seconds at the gap.
    settings, env = start_platform(host_delay_ms=400, batch_size=200)
    store = CrawlStore.from_settings(settings)
    with DemoSite(n_pages=60, seed=2).serve() as server:
        expected = server.site.expected_urls(server.base_url)
        assert cli(env, "crawl", server.base_url + "/", "--crawl-id", "ctl").returncode == 0
        _until(lambda: _page_requests(server) >= 12)  # the home page, its links, then the next level's
        paused = cli(env, "pause", "ctl")
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.startswith("crawl ctl paused: ")
        settled = _quiet(server)  # the batch fetching stops; its pages land
        time.sleep(3)
        assert len(server.requests) == settled  # and no later batch fetches the paused crawl
        assert _pages(store, "ctl") < len(expected)
        # The batch that was fetching when the pause came stopped inside: it fetched some URLs of
        # the crawl and passed over the rest, which landed skipped and stay paused.
        (stopped,) = store.query(
            "SELECT count(*) FROM batch_items b JOIN frontier f USING (crawl_id, url) "
            "WHERE b.crawl_id = 'ctl' AND b.outcome = 'skipped' AND f.state = 'paused' AND EXISTS ("
            "SELECT 1 FROM batch_items o WHERE o.batch_id = b.batch_id AND o.crawl_id = 'ctl' "
            "AND o.outcome IN ('fetched', 'failed'))")[0]
        assert stopped > 0
        # Another producer resumes it on the control topic: the daemon's control sensor applies it.
        submit_control(KafkaBus.from_settings(settings), build_control("ctl", "resume"))
        _until(lambda: _state(store, "ctl") == "active")
        _until(lambda: store.query("SELECT count(*) FROM frontier WHERE crawl_id = 'ctl' AND state IN "
                                   "('discovered', 'queued', 'paused')")[0][0] == 0, store=store)
        assert_landed_exactly_once(store, "ctl", expected)
        status = cli(env, "status", "--crawl-id", "ctl")
        assert "finished" in status.stdout

    with DemoSite(n_pages=30, seed=4).serve() as other:
        assert cli(env, "crawl", other.base_url + "/", "--crawl-id", "gone").returncode == 0
        _until(lambda: _pages(store, "gone") >= 2)
        cancelled = cli(env, "cancel", "gone")
        assert cancelled.returncode == 0, cancelled.stderr
        settled = _quiet(other)
        time.sleep(3)
        assert len(other.requests) == settled
    states = dict(store.query("SELECT state, count(*) FROM frontier WHERE crawl_id = 'gone' GROUP BY state"))
    # Nothing pending is left: each URL has its outcome from before the cancel, or is cancelled
    # (a robots-disallowed /private/ link the batches reached before the cancel is an outcome too).
    assert set(states) <= {"fetched", "failed", "disallowed", "cancelled"}
    assert states.get("cancelled", 0) > 0
    assert cli(env, "resume", "gone").returncode == 2
