"""The near_duplicates asset materialised through Dagster over a lake the engine crawled a site with
planted copies into: its rows and metadata, a crawl chosen in its config, and an unknown crawl failing
with one line."""

from dagster import materialize

from crawl_platform_dagster.assets.near_duplicates import near_duplicates
from tests.dagster.conftest import RESOURCES
from tests.unit.crawl_rows import crawl_site


def _run(instance, **config):
    return materialize([near_duplicates], instance=instance, resources=RESOURCES, raise_on_error=False,
                       run_config={"ops": {"near_duplicates": {"config": config}}})


def test_near_duplicates_materialises_the_planted_groups_with_their_metadata(crawl_env, bus, store, news_site,
                                                                              instance):
    site, pages, _planted = news_site
    crawl_site(crawl_env, bus, store, site.url("/"), "news")
    crawl_site(crawl_env, bus, store, site.url("/"), "again")  # nothing changed: the same versions, grouped per crawl

    result = _run(instance)
    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("near_duplicates")[0].metadata.items()}
    assert {k: meta[k] for k in ("groups", "exact_groups", "near_groups", "largest_group", "pages_in_groups",
                                 "documents", "crawls", "max_distance")} == {
        "groups": 6, "exact_groups": 2, "near_groups": 4, "largest_group": 3, "pages_in_groups": 14,
        "documents": 2 * len(pages), "crawls": 2, "max_distance": 3}
    assert meta["snapshot_id"] == store.snapshot_id()
    assert store.query("SELECT crawl_id, count(DISTINCT group_id), count(*) FROM near_duplicates "
                       "GROUP BY ALL ORDER BY ALL") == [("again", 3, 7), ("news", 3, 7)]

    one = _run(instance, crawl_ids=["news"], max_distance=0)
    assert one.success
    meta = {k: v.value for k, v in one.asset_materializations_for_node("near_duplicates")[0].metadata.items()}
    # At 0 bits the printer version (its "printed from" line) is no copy any more; the other crawl keeps its rows.
    assert (meta["groups"], meta["pages_in_groups"], meta["crawls"], meta["max_distance"]) == (2, 5, 1, 0)
    assert store.query("SELECT crawl_id, count(DISTINCT group_id), count(*) FROM near_duplicates "
                       "GROUP BY ALL ORDER BY ALL") == [("again", 3, 7), ("news", 2, 5)]
    assert store.query("SELECT count(*) FROM near_duplicates WHERE crawl_id = 'news' AND url LIKE '%/news/1%'") == [
        (0,)]


def test_an_unknown_crawl_fails_the_materialisation_with_one_line(crawl_env, store, instance):
    result = _run(instance, crawl_ids=["missing"])
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    assert error.message.strip().endswith("unknown crawl: missing (crawls in the lake: none)")
    assert store.query("SELECT count(*) FROM near_duplicates") == [(0,)]
