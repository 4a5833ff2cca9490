"""The embedded broker keeps data in memory: kill it mid-crawl and start it again empty. The
platform notices (topics gone, offsets behind its cursors), recreates the topics, re-publishes
from DuckDB every URL known but not fetched, and the crawl completes with every page once."""

import subprocess
import sys
import time

import pytest

from crawl_platform.broker import EmbeddedBroker, free_port
from crawl_platform.demo_site import DemoSite
from crawl_platform.store import CrawlStore
from tests.e2e.conftest import REPO

pytestmark = pytest.mark.e2e


def test_crawl_survives_a_broker_restart_that_lost_everything(start_platform, tmp_path):
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
    try:
        settings, env = start_platform(kafka_bootstrap_servers=broker.bootstrap_servers,
                                       host_delay_ms=40, batch_size=40)
        store = CrawlStore.from_settings(settings)
        with DemoSite(n_pages=120, seed=9).serve() as server:
            waiter = subprocess.Popen(
                [sys.executable, "-m", "crawl_platform.cli", "crawl", server.base_url + "/", "--crawl-id", "lossy",
                 "--wait", "--timeout", "400"], env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                if store.path.exists() and store.query("SELECT count(*) FROM pages")[0][0] >= 20:
                    break
                time.sleep(0.5)
            pending = store.query("SELECT count(*) FROM frontier WHERE state IN ('discovered', 'queued')")[0][0]
            assert pending > 0, "the crawl finished before the broker could be killed"
            broker.kill()  # kill -9: every topic and message is gone
            broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
            out, _ = waiter.communicate(timeout=420)
            assert waiter.returncode == 0, out
            urls = [r[0] for r in store.query("SELECT url FROM pages")]
            assert len(urls) == len(set(urls))
            assert set(urls) == server.site.expected_urls(server.base_url)
            assert store.query("SELECT count(*) FROM frontier WHERE crawl_id = 'lossy' "
                               "AND state IN ('discovered', 'queued')")[0][0] == 0
    finally:
        broker.stop()
