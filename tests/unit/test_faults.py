"""Faults that must cost time, never data: a duplicate delivery, and a process killed in the
middle of the landing transaction."""

import subprocess
import sys
import textwrap
from urllib.parse import urlsplit

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import parse_batch_key, plan_batches
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.planning import PlannedBatch
from crawl_platform.pipeline.submission import build_crawl_request
from tests.unit.crawl_rows import crawl_loop


def _batches(bus, topic, cursor):
    plan = plan_batches(bus.watermarks(topic), cursor, batch_size=1000, max_batches=100)
    return plan.ranges, plan.cursor


def test_the_same_frontier_message_twice_lands_and_fetches_once(settings, bus, store, site):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request([site.base_url + "/page/2"], crawl_id="dup", max_depth=0))
    duplicate = FrontierURL("dup", site.base_url + "/page/2", 0)
    assert all(publish_frontier(bus, [duplicate]))  # the broker delivers it a second time
    crawler = BatchCrawler.from_settings(settings)
    cursor: dict[int, int] = {}
    ranges, cursor = _batches(bus, settings.frontier_topic, cursor)
    (first,) = ranges
    assert first.end - first.start == 2  # both copies in one batch
    crawler.fetch_and_land("e0." + first.key, first, refetch_done=False)
    crawler.expand("e0." + first.key)
    assert all(publish_frontier(bus, [duplicate]))  # ...and once more, after it was fetched
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
    from crawl_platform.pipeline.batch import BatchCrawler
    from crawl_platform.bus.offsets import parse_batch_key
    from crawl_platform.store import database as store_module

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
    crawler.fetch_and_land(sys.argv[1], parse_batch_key(sys.argv[1])[1])
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


def test_a_1000_page_crawl_with_every_message_twice_a_killed_landing_and_a_rematerialisation(crawl_env, bus,
                                                                                             store):
    """The faults of this module on one generated site of over 1,000 pages, crawled to the end by the
    engine: every frontier message is delivered a second time (later, in another batch), the
    first sizeable batch's landing is killed mid-transaction and that batch is simply run again,
    and a finished batch is materialised twice. Every reachable URL lands exactly once, nothing is
    left pending, and only the re-runs fetch a page twice."""
    topic = crawl_env.frontier_topic
    with DemoSite(n_pages=1000, seed=31).serve() as server:
        expected = server.site.expected_urls(server.base_url)
        assert len(expected) > 1000
        Frontier(store, bus).register(build_crawl_request([server.base_url + "/"], crawl_id="big",
                                                          max_depth=100, max_pages=10**6))
        duplicated: set[bytes] = set()
        killed: list[str] = []

        def faults(batch: PlannedBatch) -> None:
            records = [r for offsets in batch.ranges for r in bus.read_range(topic, offsets)]
            again = [(r.key, r.value) for r in records if r.value not in duplicated]
            duplicated.update(v for _k, v in again)
            assert all(bus.publish(topic, again))  # the broker delivers each message once more
            if not killed and len(records) > 10:
                died = subprocess.run([sys.executable, "-c", KILL_MID_LANDING, batch.key],
                                      capture_output=True, text=True, timeout=120, check=False)
                assert died.returncode == -9, died.stdout + died.stderr
                killed.append(batch.key)

        loop = crawl_loop(crawl_env, bus, store, batch_size=150, groups=2, before_batch=faults)
        crawler = loop.crawler
        batches = loop.run_until_idle().batches
        landed = [report.batch_id for report in batches]
        skipped = sum(report.skipped for report in batches)
        assert killed
        assert skipped >= 1000  # the second copies arrived and were skipped, not fetched
        # The same partition materialised twice: refetched, and no new rows.
        rows = store.query("SELECT count(*) FROM pages")[0][0]
        crawler.fetch_and_land(landed[1], parse_batch_key(landed[1])[1])
        crawler.expand(landed[1])
        assert store.query("SELECT count(*) FROM pages")[0][0] == rows
        rerun = {r[0] for r in store.query("SELECT url FROM batch_items WHERE batch_id IN (?, ?)",
                                           [killed[0], landed[1]])}
        fetched_twice = {u for u in expected if server.request_count(urlsplit(u).path) > 1}
        # A redirect's target is requested once on its own and once through the redirect.
        targets = {r[0] for r in store.query("SELECT final_url FROM pages WHERE final_url <> url")}
        assert fetched_twice <= rerun | targets

    urls = [r[0] for r in store.query("SELECT url FROM pages WHERE crawl_id = 'big'")]
    assert len(urls) == len(set(urls)), "duplicate rows"
    assert set(urls) == expected
    assert Frontier(store, bus).status("big")[0].pending == 0
