"""Faults that must cost time, never data: a duplicate delivery, and a process killed in the
middle of the landing transaction."""

import subprocess
import sys
import textwrap

from crawl_platform.batching import plan_batches
from crawl_platform.crawl import BatchCrawler
from crawl_platform.frontier import Frontier
from crawl_platform.messages import FrontierURL
from crawl_platform.submission import build_crawl_request


def _batches(bus, topic, cursor):
    plan = plan_batches(bus.watermarks(topic), cursor, batch_size=1000, max_batches=100)
    return plan.ranges, plan.cursor


def test_the_same_frontier_message_twice_lands_and_fetches_once(settings, bus, store, site):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request([site.base_url + "/page/2"], crawl_id="dup", max_depth=0))
    duplicate = FrontierURL("dup", site.base_url + "/page/2", 0)
    assert all(bus.publish_frontier([duplicate]))  # the broker delivers it a second time
    crawler = BatchCrawler.from_settings(settings)
    cursor: dict[int, int] = {}
    ranges, cursor = _batches(bus, settings.frontier_topic, cursor)
    (first,) = ranges
    assert first.end - first.start == 2  # both copies in one batch
    crawler.fetch_and_land("e0." + first.key, first, refetch_done=False)
    crawler.expand("e0." + first.key)
    assert all(bus.publish_frontier([duplicate]))  # ...and once more, after it was fetched
    (second,), cursor = _batches(bus, settings.frontier_topic, cursor)
    report = crawler.fetch_and_land("e0." + second.key, second, refetch_done=False)
    crawler.expand("e0." + second.key)
    assert report.skipped == 1
    assert site.request_count("/page/2") == 1
    assert store.query("SELECT count(*) FROM pages")[0][0] == 1
    assert frontier.status("dup")[0].pending == 0


KILL_MID_LANDING = textwrap.dedent("""
    import os, signal, sys
    from crawl_platform.config import Settings
    from crawl_platform.crawl import BatchCrawler
    from crawl_platform.bus import OffsetRange
    from crawl_platform import store as store_module

    real_write = store_module.CrawlStore.write

    class Dying:
        # Passes statements through, and dies by SIGKILL once the pages rows are written.
        def __init__(self, con):
            self.con = con
        def __getattr__(self, name):
            return getattr(self.con, name)
        def execute(self, sql, *args):
            result = self.con.execute(sql, *args)
            if "INSERT INTO pages" in sql:
                sys.stdout.write("inserted pages, dying\\n"); sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return result

    from contextlib import contextmanager
    @contextmanager
    def dying_write(self):
        with real_write(self) as con:
            yield Dying(con)
    store_module.CrawlStore.write = dying_write
    crawler = BatchCrawler.from_settings(Settings())
    crawler.fetch_and_land(sys.argv[1], OffsetRange.parse(sys.argv[2]))
""")


def test_a_landing_killed_mid_transaction_leaves_no_partial_batch(crawl_env, bus, store, site):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request([site.base_url + "/"], crawl_id="kill", max_depth=0))
    (batch,), _ = _batches(bus, crawl_env.frontier_topic, {})
    before = store.query("SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM documents), "
                         "(SELECT count(*) FROM links), (SELECT count(*) FROM batch_items)")
    died = subprocess.run([sys.executable, "-c", KILL_MID_LANDING, "e0." + batch.key, batch.key],
                          capture_output=True, text=True, timeout=120, check=False)
    assert died.returncode == -9, died.stdout + died.stderr
    assert "inserted pages, dying" in died.stdout
    after = store.query("SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM documents), "
                        "(SELECT count(*) FROM links), (SELECT count(*) FROM batch_items)")
    assert after == before == [(0, 0, 0, 0)]
    # The batch is simply run again, and lands whole.
    crawler = BatchCrawler.from_settings(crawl_env)
    crawler.fetch_and_land("e0." + batch.key, batch)
    crawler.expand("e0." + batch.key)
    assert store.query("SELECT url FROM pages") == [(site.base_url + "/",)]
