"""Landing while fetching through Dagster: a polite batch run's fetch step lands its pages in rounds
(CRAWL_LAND_EVERY_S) before its landing step, which reports them as ``pages_landed_early``."""

from dagster import materialize

from crawl_platform.bus.offsets import batch_key, plan_batches
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
from tests.dagster.conftest import RESOURCES


def _ranges(bus, topic):
    return plan_batches(bus.watermarks(topic), {}, batch_size=1000, max_batches=100).ranges


def test_a_polite_batch_runs_pages_land_in_rounds_then_the_batch_lands_the_rest_once(
        crawl_env, bus, store, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_HOST_DELAY_MS", "150")
    monkeypatch.setenv("CRAWL_LAND_EVERY_S", "0.4")
    with DemoSite(n_pages=10, seed=6).serve() as site:
        urls = sorted(site.site.expected_urls(site.base_url))
        submit_crawl(bus, build_crawl_request(urls, crawl_id="rounds", max_depth=1))
        seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
        assert materialize([crawls], instance=instance, resources=RESOURCES,
                           run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
        key = batch_key(0, _ranges(bus, crawl_env.frontier_topic))
        instance.add_dynamic_partitions("frontier_batches", [key])
        result = materialize([crawl_batch, frontier, *quality_checks], partition_key=key, instance=instance,
                             resources=RESOURCES)
    assert result.success
    meta = next(m for m in result.get_asset_materialization_events()
                if m.asset_key.to_user_string() == "pages").materialization.metadata
    assert 0 < meta["pages_landed_early"].value <= len(urls)
    assert meta["new_versions"].value == len(urls)
    assert store.query("SELECT count(*), count(DISTINCT url), max(version) FROM pages WHERE batch_id = ?",
                       [key]) == [(len(urls), len(urls), 1)]
    assert store.query("SELECT count(*) FROM batch_items WHERE batch_id = ?", [key]) == [(len(urls),)]
    ((inserts,),) = store.query(
        "SELECT count(DISTINCT snapshot_id) FROM ducklake_table_changes(?, 'main', 'pages', 0, ?) "
        "WHERE change_type = 'insert'", [store.alias, store.snapshot_id()])
    assert inserts >= 2  # the rounds' commits, then the batch's
    assert {c.check_name for c in result.get_asset_check_evaluations() if c.passed} == {"pages_quality",
                                                                                         "documents_quality"}
