"""Landing (crawl_platform.pipeline.landing): a page's history in DuckDB, a new version only when its content
or status changes, and a batch landed twice adding nothing."""

from __future__ import annotations

from crawl_platform.bus.messages import FrontierURL
from tests.unit.crawl_rows import fetch_result, land, page_html, table_counts


def test_same_content_twice_is_one_version(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    first = land(store, "b1", item, [fetch_result(url, page_html("P", "/x"))])
    second = land(store, "b2", item, [fetch_result(url, page_html("P", "/x"))])
    assert (first.new_versions, second.new_versions) == (1, 0)
    assert store.query("SELECT url, version, batch_id FROM pages") == [(url, 1, "b1")]
    assert store.query("SELECT count(*) FROM documents") == [(1,)]


def test_changed_content_is_a_new_version_with_its_own_documents_and_links(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    land(store, "b1", item, [fetch_result(url, page_html("Old", "/x", "/y"))])
    landed = land(store, "b2", item, [fetch_result(url, page_html("New", "/z"))])
    assert landed.new_versions == 1
    assert landed.links == 1
    assert store.query("SELECT version, batch_id FROM pages ORDER BY version") == [(1, "b1"), (2, "b2")]
    assert store.query("SELECT version, title FROM documents ORDER BY version") == [(1, "Old"), (2, "New")]
    assert store.query("SELECT src_version, dst_url FROM links ORDER BY src_version, dst_url") == [
        (1, "http://a.example/x"), (1, "http://a.example/y"), (2, "http://a.example/z")]


def test_a_status_change_is_a_new_version(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    land(store, "b1", item, [fetch_result(url, page_html("P"))])
    land(store, "b2", item, [fetch_result(url, page_html("P"), status=404)])
    assert store.query("SELECT version, status FROM pages ORDER BY version") == [(1, 200), (2, 404)]


def test_landing_the_same_batch_twice_adds_no_rows(store):
    items = [FrontierURL("c1", f"http://a.example/{k}", 1) for k in range(3)]
    results = [fetch_result(i.url, page_html(f"T{k}", "/a", "/b")) for k, i in enumerate(items)]
    land(store, "b1", items, results)
    before = table_counts(store)
    again = land(store, "b1", items, results)
    assert again.new_versions == 0
    assert table_counts(store) == before
    assert before == {"pages": 3, "documents": 3, "links": 6, "batch_items": 3}


def test_failures_land_with_their_error_and_disallowed_pages_do_not_land(store):
    items = [FrontierURL("c1", f"http://a.example/{n}", 0) for n in ("ok", "gone", "down", "secret")]
    land(store, "b1", items, [
        fetch_result("http://a.example/ok", page_html("OK")),
        fetch_result("http://a.example/gone", page_html("Not found"), status=404),
        fetch_result("http://a.example/down", status=None, error="ConnectionError: refused"),
        fetch_result("http://a.example/secret", status=None, error="disallowed by robots.txt", disallowed=True),
    ])
    rows = store.query("SELECT url, status, error FROM pages")
    pages = {url: (status, error) for url, status, error in rows}
    assert pages == {
        "http://a.example/ok": (200, None),
        "http://a.example/gone": (404, None),
        "http://a.example/down": (None, "ConnectionError: refused"),
    }
    outcomes = dict(store.query("SELECT url, outcome FROM batch_items WHERE batch_id = 'b1'"))
    assert outcomes == {"http://a.example/ok": "fetched", "http://a.example/gone": "failed",
                        "http://a.example/down": "failed", "http://a.example/secret": "disallowed"}
