"""The whole loop as a user runs it: CLI -> seeds topic -> Dagster daemon sensors -> partitioned runs
-> the lake -> frontier topic -> ... on the real broker, a Dagster instance on PostgreSQL and a
generated site of a few hundred pages on loopback, with an analyst's reader holding the lake open."""

import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import decode_dead_letter
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import cli, lake_reader

# One platform for the module's three tests, which run in order (the last checks the batches the
# first two landed); `make test` distributes by module (--dist loadfile), so one worker runs them all.
pytestmark = pytest.mark.e2e(seconds=330)
REPO = Path(__file__).resolve().parents[2]
SITE_PAGES = 300


@pytest.fixture(scope="module")
def platform(start_platform):
    return start_platform(host_delay_ms=0, batch_size=100)


@pytest.fixture(scope="module")
def demo():
    site = DemoSite(n_pages=SITE_PAGES, seed=11)
    with site.serve() as server:
        yield site, server


@pytest.mark.timeout(900)  # two crawls and a recrawl under the daemon: 363-570 s in CI, past 600 s once
def test_crawl_lands_exactly_the_reachable_site_then_recrawl_versions_only_the_changed_page(platform, demo,
                                                                                             tmp_path):
    settings, env = platform
    site, server = demo
    store = CrawlStore.from_settings(settings)
    expected = site.expected_urls(server.base_url)
    assert len(expected) > SITE_PAGES

    # A notebook holds the lake open, reading in long transactions, for the whole first crawl.
    with lake_reader(settings, tmp_path) as seen:
        done = cli(env, "crawl", server.base_url + "/", "--crawl-id", "first", "--wait", "--timeout", "360")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crawl first: done, pending 0" in done.stdout
    # Every read succeeded, each saw one snapshot throughout its transaction, and the reads overlapped
    # the landings (the lake grew under the open reader).
    assert seen["errors"] == []
    reads = seen["reads"]
    assert len(reads) >= 3
    assert all(r["before"] == r["after"] == r["distinct_urls"] for r in reads)
    counts = [r["after"] for r in reads]
    assert counts == sorted(counts)
    assert counts[0] < len(expected), "the reader only read after the crawl had landed"

    rows = store.query("SELECT url, version, status, final_url, content_type FROM pages WHERE crawl_id = 'first'")
    urls = [r[0] for r in rows]
    assert len(urls) == len(set(urls))
    assert set(urls) == expected
    by_url = {r[0]: r for r in rows}
    assert by_url[server.base_url + "/missing"][2] == 404
    assert by_url[server.base_url + "/old-home"][3] == server.base_url + "/page/1"
    assert "json" in by_url[server.base_url + "/data.json"][4]
    assert server.request_count("/private/0") == 0  # robots.txt obeyed
    (documents,) = store.query("SELECT count(*) FROM documents")[0]
    assert documents == sum(1 for r in rows if "html" in (r[4] or ""))  # 404 pages are HTML too

    # Every response the runs' fetch steps received is in the raw archive: `show` prints one from it.
    assert store.query("SELECT count(*) FROM pages WHERE status IS NOT NULL AND warc_file IS NULL") == [(0,)]
    ((title,),) = store.query("SELECT title FROM documents WHERE url = ?", [server.base_url + "/page/1"])
    before = server.request_count("/page/1")
    shown = cli(env, "show", server.base_url + "/page/1")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("HTTP/1.1 200 OK\n")  # text mode: \r\n read as \n
    assert f"<title>{title}</title>" in shown.stdout
    assert server.request_count("/page/1") == before

    site.set_page_text("/page/3", "This article was rewritten after the first crawl.")
    again = cli(env, "crawl", server.base_url + "/", "--crawl-id", "second", "--wait", "--timeout", "360")
    assert again.returncode == 0, again.stdout + again.stderr
    versions = store.query("SELECT url, max(version), count(*) FROM pages GROUP BY url")
    changed = {url for url, top, _ in versions if top > 1}
    assert changed == {server.base_url + "/page/3"}
    assert all(count == top for _url, top, count in versions)
    (fetched_second,) = store.query(
        "SELECT count(*) FROM frontier WHERE crawl_id = 'second' AND state IN ('fetched', 'failed')")[0]
    assert fetched_second == len(expected)

    status = cli(env, "status")
    assert status.returncode == 0
    assert "first" in status.stdout
    assert "second" in status.stdout


def test_malformed_messages_go_to_dead_letter_and_the_loop_keeps_going(platform, demo):
    settings, env = platform
    _site, server = demo
    bus = KafkaBus.from_settings(settings)
    assert all(bus.publish(settings.frontier_topic, [(b"x", b"not json at all"),
                                                     (b"x", b'{"type":"frontier_url","v":99}')]))
    assert all(bus.publish(settings.seeds_topic, [(b"x", b'{"type":"crawl_request","v":1,"seeds":[]}')]))
    small = cli(env, "crawl", server.base_url + "/page/5", "--crawl-id", "after-garbage",
                "--max-depth", "1", "--wait", "--timeout", "240")
    assert small.returncode == 0, small.stdout + small.stderr
    letters = []
    for part, (low, high) in bus.watermarks(settings.dead_letter_topic).items():
        if high > low:
            letters += [decode_dead_letter(r.value) for r in bus.read_range(settings.dead_letter_topic,
                                                                            OffsetRange(part, low, high))]
    reasons = sorted((d.source_topic, d.reason) for d in letters)
    assert reasons == [
        (settings.frontier_topic, "not JSON: expected ident at line 1 column 2"),
        (settings.frontier_topic, "unsupported version 99 of frontier_url"),
        (settings.seeds_topic, "field 'crawl_id' is missing"),  # the first field the request lacks
    ]


def test_the_quality_sensor_checks_every_landed_batch_with_great_expectations(platform):
    """Runs after the crawls above: every batch in `pages` is covered by a successful
    crawl_quality_job run whose two GX checks passed."""
    settings, _env = platform
    store = CrawlStore.from_settings(settings)
    landed = {r[0] for r in store.query("SELECT DISTINCT batch_id FROM pages")}
    assert landed
    deadline = time.monotonic() + 150
    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        while True:
            runs = instance.get_runs(RunsFilter(job_name="crawl_quality_job"))
            done = [r for r in runs if r.status == DagsterRunStatus.SUCCESS]
            checked = {b for r in done for b in r.run_config["ops"]["pages_pages_quality"]["config"]["batches"]}
            if landed <= checked or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert landed <= checked, f"{len(landed - checked)} landed batches never checked"
        assert all(r.status != DagsterRunStatus.FAILURE for r in runs)
        evaluations = [e.dagster_event.event_specific_data for r in done
                       for e in instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)]
        assert {(e.check_name, e.passed) for e in evaluations} == {("pages_quality", True),
                                                                    ("documents_quality", True)}
