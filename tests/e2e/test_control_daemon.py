"""Crawl control through the running platform: ``crawl-platform pause`` stops a crawl mid-way under the
Dagster daemon, a resume put on the control topic by another producer is applied by the daemon's
control sensor, the crawl lands exactly its site, and a cancelled crawl stops for good."""

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


def test_pause_then_resume_from_the_topic_then_cancel_under_the_daemon(start_platform):
    settings, env = start_platform(host_delay_ms=150, batch_size=8)
    store = CrawlStore.from_settings(settings)
    with DemoSite(n_pages=30, seed=2).serve() as server:
        expected = server.site.expected_urls(server.base_url)
        assert cli(env, "crawl", server.base_url + "/", "--crawl-id", "ctl").returncode == 0
        _until(lambda: _pages(store, "ctl") >= 3)
        paused = cli(env, "pause", "ctl")
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.startswith("crawl ctl paused: ")
        time.sleep(8)  # batches already fetching land; none after them fetches the paused crawl
        settled = len(server.requests)
        time.sleep(8)
        assert len(server.requests) == settled
        assert _pages(store, "ctl") < len(expected)
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
        time.sleep(8)
        settled = len(other.requests)
        time.sleep(8)
        assert len(other.requests) == settled
    states = dict(store.query("SELECT state, count(*) FROM frontier WHERE crawl_id = 'gone' GROUP BY state"))
    # Nothing pending is left: each URL has its outcome from before the cancel, or is cancelled
    # (a robots-disallowed /private/ link the batches reached before the cancel is an outcome too).
    assert set(states) <= {"fetched", "failed", "disallowed", "cancelled"}
    assert states.get("cancelled", 0) > 0
    assert cli(env, "resume", "gone").returncode == 2
