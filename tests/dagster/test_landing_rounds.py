"""Landing while fetching through Dagster: a polite batch run's fetch step lands its pages in rounds
(CRAWL_LAND_EVERY_S) before its landing step, which reports them as ``pages_landed_early``."""

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.pipeline.submission import build_crawl_request
from tests.dagster.conftest import crawl_first_batch


def test_a_polite_batch_runs_pages_land_in_rounds_then_the_batch_lands_the_rest_once(
        crawl_env, bus, store, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_HOST_DELAY_MS", "150")
    monkeypatch.setenv("CRAWL_LAND_EVERY_S", "0.4")
    with DemoSite(n_pages=10, seed=6).serve() as site:
        urls = sorted(site.site.expected_urls(site.base_url))
        key, result = crawl_first_batch(instance, bus, crawl_env,
                                        build_crawl_request(urls, crawl_id="rounds", max_depth=1))
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
