"""The documents_markdown asset over a lake the engine crawled (with the raw archive on): Python docs
pages and a news page become Markdown with their published dates, read from the archive with no
request reaching the site; a second run extracts nothing new; and its automation condition
requests it once after a batch lands pages, and not again until the next one."""

from datetime import date

from dagster import AssetKey, AssetMaterialization, evaluate_automation_conditions, materialize

from crawl_platform_dagster.assets.markdown import documents_markdown
from crawl_platform_dagster.definitions import defs
from tests.dagster.conftest import RESOURCES
from tests.sites.hostile import HostileSite, Reply
from tests.unit.crawl_rows import crawl_site
from tests.unit.test_main_text import PYTHON_DOCS

NEWS = (b"<!DOCTYPE html><html><head><title>Harbour opens</title>"
        b"<meta property='article:published_time' content='2024-05-03T10:00:00Z'></head><body>"
        b"<nav>Home News Sport</nav><article><h1>The new harbour opens</h1>"
        + b"<p>The council opened the new harbour on Friday morning after three years of building work.</p>" * 8
        + b"</article><footer>Copyright The Daily Harbour</footer></body></html>")


def _meta(result):
    return {k: v.value for k, v in result.asset_materializations_for_node("documents_markdown")[0].metadata.items()}


def test_markdown_and_dates_come_from_the_archive_with_no_request_to_the_site(crawl_env, bus, store, instance):
    with HostileSite() as site:
        site.robots = Reply(200, b"User-agent: *\nAllow: /\n", {"Content-Type": "text/plain"})
        for page in ("library/json.html", "tutorial/introduction.html"):
            site.static[f"/docs/{page}"] = Reply(200, (PYTHON_DOCS / page).read_bytes())
        site.static["/news/harbour"] = Reply(200, NEWS)
        site.static["/"] = Reply(200, b"<html><body><a href='/docs/library/json.html'>json</a> "
                                      b"<a href='/docs/tutorial/introduction.html'>intro</a> "
                                      b"<a href='/news/harbour'>news</a></body></html>")
        crawl_site(crawl_env, bus, store, site.url("/"), "docs", max_depth=1)
        site.settle()
        requests = len(site.requests)

        result = materialize([documents_markdown], instance=instance, resources=RESOURCES)
        assert result.success
        site.settle()
        assert len(site.requests) == requests  # read from the archive, never from the site
    meta = _meta(result)
    assert {k: meta[k] for k in ("extracted", "with_markdown", "with_published_date", "unarchived", "crawls")} == {
        "extracted": 4, "with_markdown": 4, "with_published_date": 3, "unarchived": 0, "crawls": 1}
    rows = {url[len(site.base_url):]: rest for url, *rest in store.query(
        "SELECT url, version, markdown, published_date, extractor, error FROM documents_markdown")}
    assert set(rows) == {"/", "/docs/library/json.html", "/docs/tutorial/introduction.html", "/news/harbour"}
    version, markdown, _published, extractor, error = rows["/docs/library/json.html"]
    assert (version, error) == (1, None)
    assert markdown.startswith("# `json` — JSON encoder and decoder")
    assert "Report a Bug" not in markdown
    assert extractor.startswith("trafilatura 2.")
    assert "; htmldate 1." in extractor
    assert rows["/news/harbour"][1].startswith("# The new harbour opens\n\nThe council opened the new harbour")
    assert "Copyright" not in rows["/news/harbour"][1]
    assert rows["/news/harbour"][2] == date(2024, 5, 3)

    again = materialize([documents_markdown], instance=instance, resources=RESOURCES)
    assert again.success
    assert _meta(again)["extracted"] == 0
    assert store.query("SELECT count(*) FROM documents_markdown") == [(4,)]


def test_the_automation_condition_requests_markdown_once_per_landed_batch(instance):
    selection = defs.resolve_asset_graph().get(AssetKey("documents_markdown")).key
    first = evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.get_num_requested(selection) == 0  # nothing landed yet
    handled = evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert handled.get_num_requested(selection) == 0

    instance.add_dynamic_partitions("frontier_batches", ["e0.p0-0-5"])
    instance.report_runless_asset_event(AssetMaterialization("pages", partition="e0.p0-0-5"))
    landed = evaluate_automation_conditions(defs=defs, instance=instance, cursor=handled.cursor)
    assert landed.get_num_requested(selection) == 1
    assert evaluate_automation_conditions(defs=defs, instance=instance,
                                          cursor=landed.cursor).get_num_requested(selection) == 0
