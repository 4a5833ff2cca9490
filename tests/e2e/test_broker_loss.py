"""The embedded broker keeps data in memory: kill it mid-crawl and start it again empty. The
platform notices (topics gone, offsets behind its cursors), recreates the topics, re-publishes
from DuckDB every URL known but not fetched, and the crawl completes with every page once."""

import subprocess
import time

import pytest

from crawl_platform.bus.broker import EmbeddedBroker, free_port
from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import CRAWL_PLATFORM, REPO, Sites, assert_landed_exactly_once

pytestmark = pytest.mark.e2e(seconds=230)


def test_crawl_survives_a_broker_restart_that_lost_everything(start_platform, tmp_path):
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
    try:
        settings, env = start_platform(kafka_bootstrap_servers=broker.bootstrap_servers,
                                       host_delay_ms=5, batch_size=150)
        store = CrawlStore.from_settings(settings)
        with Sites(total_pages=1000, hosts=4, seed=9) as sites:
            waiter = subprocess.Popen(
                [*CRAWL_PLATFORM, "crawl", *sites.seeds, "--crawl-id", "lossy",
                 "--wait", "--timeout", "500"], env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if store.exists() and store.query("SELECT count(*) FROM pages")[0][0] >= 100:
                    break
                time.sleep(0.5)
            pending = store.query("SELECT count(*) FROM frontier WHERE state IN ('discovered', 'queued')")[0][0]
            assert pending > 0, "the crawl finished before the broker could be killed"
            broker.kill()  # kill -9: every topic and message is gone
            broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
            out, _ = waiter.communicate(timeout=520)
            assert waiter.returncode == 0, out
            expected = sites.expected_urls()
            assert len(expected) >= 1000
            assert_landed_exactly_once(store, "lossy", expected)
    finally:
        broker.stop()
