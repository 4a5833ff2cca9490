"""What the hostile site's pages look like once landed (fetcher -> parser -> crawl_platform.pipeline.landing):
readable text and the charset for awkward encodings, malformed HTML, failures as rows with their
error, non-HTML recorded but not parsed, the redirect chain, and the hosts learned."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher, FetchResult
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.fetch.retry import RetryPolicy
from crawl_platform.parse.html import ParsedPage, parse_html
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.engine import current_snapshot
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.pages import KnownVersion, LatestVersion, latest_versions, versions_since
from tests.conftest import lake_catalog
from tests.sites import dead_port
from tests.sites.hostile import CP1251_TEXT, GB18030_TEXT, html_page
from tests.unit.conftest import UNREACHABLE, loopback_fetcher

# A failure lands after two quick attempts, and no adaptive politeness gap slows the test down.
LANDING = {"retry": RetryPolicy(max_attempts=2, backoff_s=0.01), "max_host_delay_s": 0.0}


@pytest.fixture
def db(tmp_path) -> CrawlStore:
    return CrawlStore(LakeLocation.from_settings(Settings(lake_path=tmp_path / "lake")))


def _land(db: CrawlStore, fetcher: Fetcher, urls: list[str], engine: str = "lxml") -> None:
    """What BatchCrawler does between the bus and the frontier."""
    items = [FrontierURL("c1", url, 0) for url in urls]
    results = fetcher.fetch_all(urls)
    parsed = {u: parse_html(r.body, r.final_url, r.content_type, engine)  # type: ignore[arg-type]
              for u, r in results.items() if r.is_html}
    land_batch(db, "b1", items, results, parsed, fetcher.host_records())


def _documents(db: CrawlStore) -> dict[str, tuple[str | None, str | None, str]]:
    rows = db.query("SELECT p.url, p.charset, d.title, d.text FROM pages p JOIN documents d USING (url, version)")
    return {url: (charset, title, text) for url, charset, title, text in rows}


@pytest.mark.parametrize("engine", ["lxml", "bs4"])
def test_awkward_encodings_land_as_readable_text_with_their_charset(hostile, db, engine):
    kinds = ["gb18030", "meta", "undeclared", "broken", "bogus-label"]
    _land(db, loopback_fetcher(**LANDING), [hostile.url(f"/enc/{k}") for k in kinds], engine)
    docs = {url.rsplit("/", 1)[1]: doc for url, doc in _documents(db).items()}
    assert docs["gb18030"] == ("gb18030", "中文", GB18030_TEXT)  # labelled gb2312, needs GB18030
    assert docs["meta"] == ("cp1251", "Кириллица", CP1251_TEXT)  # only the meta tag says so
    assert docs["undeclared"] == ("cp1251", "Без метки", f"{CP1251_TEXT} {CP1251_TEXT}")  # detected
    charset, title, text = docs["broken"]
    assert (charset, title) == ("utf-8", "Broken bytes")
    assert text.startswith("before \ufffd")
    assert text.endswith("after — still readable")
    assert docs["bogus-label"] == ("utf-8", "Bogus", "naïve café")


@pytest.mark.parametrize("engine", ["lxml", "bs4"])
def test_malformed_html_lands_with_its_text_and_links(hostile, db, engine):
    _land(db, loopback_fetcher(**LANDING), [hostile.url("/malformed")], engine)
    ((_, title, text),) = _documents(db).values()
    assert title == "Malformed"
    assert text.startswith("Unclosed first link second")
    assert "deep text" in text  # after 1000 unclosed <div>s
    links = {r[0] for r in db.query("SELECT dst_url FROM links")}
    assert links == {hostile.url("/page/1"), hostile.url("/page/2")}


def test_failures_land_as_rows_with_their_error(hostile, db):
    dead = f"http://127.0.0.1:{dead_port()}/gone"
    urls = [hostile.url(p) for p in ("/trickle", "/huge", "/loop/a", "/status/503")] + [dead]
    _land(db, loopback_fetcher(**LANDING, deadline_s=0.5, max_body_bytes=64 * 1024), urls)
    rows = {url: (status, error) for url, status, error in db.query("SELECT url, status, error FROM pages")}
    assert rows[hostile.url("/trickle")] == (None, "deadline exceeded: no complete response within 0.5s")
    assert rows[hostile.url("/huge")] == (None, "body larger than 65536 bytes")
    assert rows[hostile.url("/loop/a")][0] is None
    assert rows[hostile.url("/loop/a")][1].startswith("redirect loop: ")
    assert rows[hostile.url("/status/503")] == (503, "HTTP 503: gave up after 2 attempts")
    # robots.txt comes first, so a dead host fails there: a failure row, not "disallowed".
    assert rows[dead] == (None, UNREACHABLE)
    outcomes = dict(db.query("SELECT url, outcome FROM batch_items"))
    assert set(outcomes.values()) == {"failed"}
    # Only the 503's own HTML page was read (error pages are documents, like a 404's).
    assert db.query("SELECT url FROM documents") == [(hostile.url("/status/503"),)]


def test_a_type_off_the_allow_list_is_recorded_but_not_parsed(hostile, db):
    _land(db, loopback_fetcher(**LANDING), [hostile.url("/pdf"), hostile.url("/page/1")])
    rows = db.query("SELECT url, status, content_type, content_length, error FROM pages ORDER BY url")
    assert rows == [
        (hostile.url("/page/1"), 200, "text/html; charset=utf-8", len(html_page("Page 1", "/page/2")), None),
        (hostile.url("/pdf"), 200, "application/pdf", 0, None),
    ]
    assert [r[0] for r in db.query("SELECT url FROM documents")] == [hostile.url("/page/1")]
    assert db.query("SELECT outcome FROM batch_items WHERE url = ?", [hostile.url("/pdf")]) == [("fetched",)]


def test_the_redirect_chain_and_final_url_are_stored(hostile, db):
    _land(db, loopback_fetcher(**LANDING), [hostile.url("/chain/2"), hostile.url("/page/1")])
    rows = {url: (final, chain) for url, final, chain in
            db.query("SELECT url, final_url, redirect_chain FROM pages")}
    chain = [hostile.url("/chain/2"), hostile.url("/chain/1")]
    assert rows[hostile.url("/chain/2")] == (hostile.url("/chain/0"), chain)
    assert rows[hostile.url("/page/1")] == (hostile.url("/page/1"), [])


def test_what_the_fetcher_learned_about_the_host_lands_with_the_batch(hostile, db):
    _land(db, loopback_fetcher(**LANDING), [hostile.url("/page/1")])
    assert db.query("SELECT origin, robots_status, delay_ms, robots_fetched_at IS NOT NULL FROM hosts") == [
        (origin_of(hostile.base_url), 404, 0, True)]


def test_validators_come_from_the_latest_version_only(hostile, db):
    url, never_landed = hostile.url("/etag"), hostile.url("/never-landed")
    _land(db, loopback_fetcher(**LANDING), [url])
    ((modified, digest),) = db.query("SELECT last_modified, content_hash FROM pages")
    with db.read() as con:
        assert latest_versions(con, [url, never_landed]) == {url: LatestVersion(digest, '"v1"', modified, 1)}
    # A later version that is an error must not be asked for conditionally: a 304 would keep the
    # error as the page's latest version.
    now = datetime.now(UTC).replace(tzinfo=None)
    failed = FetchResult(url, url, None, None, b"", "ConnectionError: reset", now, 1.0)
    land_batch(db, "b2", [FrontierURL("c1", url, 0)], {url: failed}, {})
    ((error_digest,),) = db.query("SELECT content_hash FROM pages WHERE version = 2")
    with db.read() as con:
        assert latest_versions(con, [url]) == {url: LatestVersion(error_digest, None, None, 2)}


def _page(url: str, body: bytes) -> FetchResult:
    return FetchResult(url, url, 200, "text/html", body, None, datetime.now(UTC).replace(tzinfo=None), 1.0)


def test_an_unchanged_page_left_unparsed_lands_nothing(db):
    url = "http://127.0.0.1:9/a"
    first = _page(url, html_page("A", "/b"))
    land_batch(db, "b1", [FrontierURL("c1", url, 0)], {url: first}, {url: parse_html(first.body, url)})
    again = _page(url, html_page("A", "/b"))
    landed = land_batch(db, "b2", [FrontierURL("c2", url, 0)], {url: again}, {}, unchanged={url})
    assert (landed.new_versions, landed.documents, landed.refetch) == (0, 0, frozenset())
    assert db.query("SELECT version, title FROM pages JOIN documents USING (url, version)") == [(1, "A")]
    assert db.query("SELECT outcome FROM batch_items WHERE batch_id = 'b2'") == [("fetched",)]


def test_an_unchanged_page_another_batch_landed_meanwhile_is_left_for_a_later_batch_that_parses_it(db):
    url = "http://127.0.0.1:9/a"
    first, other = _page(url, html_page("A", "/b")), _page(url, html_page("Other", "/c"))
    land_batch(db, "b1", [FrontierURL("c1", url, 0)], {url: first}, {url: parse_html(first.body, url)})
    # A batch reads version 1 and fetches the same body again, so leaves it unparsed; before it
    # lands, another crawl lands a different body as version 2.
    land_batch(db, "b2", [FrontierURL("c2", url, 0)], {url: other}, {url: parse_html(other.body, url)})
    late = _page(url, first.body)
    landed = land_batch(db, "b3", [FrontierURL("c1", url, 0)], {url: late}, {}, unchanged={url})
    # Landing parses nothing: the page would be a version without its document, so it lands
    # nothing and its item is postponed (published again for a later batch).
    assert (landed.new_versions, landed.documents, landed.links, landed.refetch) == (0, 0, 0, frozenset({url}))
    assert db.query("SELECT outcome FROM batch_items WHERE batch_id = 'b3'") == [("postponed",)]
    # The later batch's fetch step sees a body other than the latest version's, and parses it.
    again = land_batch(db, "b4", [FrontierURL("c1", url, 0)], {url: late}, {url: parse_html(late.body, url)})
    assert (again.new_versions, again.documents, again.links, again.refetch) == (1, 1, 1, frozenset())
    rows = db.query("SELECT version, charset, title FROM pages JOIN documents USING (url, version) ORDER BY version")
    assert rows == [
        (1, "utf-8", "A"), (2, "utf-8", "Other"), (3, "utf-8", "A")]
    assert db.query("SELECT dst_url FROM links WHERE src_version = 3") == [("http://127.0.0.1:9/b",)]


@pytest.fixture(params=["sqlite", "postgres"])
def any_catalog(request: pytest.FixtureRequest, tmp_path) -> Iterator[CrawlStore]:
    """A new lake whose catalog is an embedded SQLite file or a PostgreSQL database."""
    if request.param == "sqlite":
        location = LakeLocation.from_settings(Settings(lake_path=tmp_path / "lake"))
    else:
        location = LakeLocation(lake_catalog(request.getfixturevalue("postgres_url")), f"{tmp_path / 'data'}/")
    store = CrawlStore(location)
    yield store
    store.close()


def test_landing_reads_only_the_versions_committed_since_its_reader_read_the_lake(any_catalog):
    db = any_catalog
    a, b, c = (f"http://127.0.0.1:9/{name}" for name in "abc")
    first = _page(a, html_page("A", "/x"))
    land_batch(db, "b1", [FrontierURL("c1", a, 0)], {a: first}, {a: parse_html(first.body, a)})
    with db.read() as con:  # what a batch's reader finds: a at version 1, b and c nowhere
        latest, snapshot = latest_versions(con, [a, b, c]), current_snapshot(con, db.alias)
    known = {url: KnownVersion(snapshot, v.version, v.content_hash) if (v := latest.get(url))
             else KnownVersion(snapshot) for url in (a, b, c)}
    # Before the batch lands, another batch lands a new version of a and a first one of b.
    other = {url: _page(url, html_page("Other", "/y")) for url in (a, b)}
    land_batch(db, "b2", [FrontierURL("c2", url, 0) for url in other], other,
               {url: parse_html(r.body, url) for url, r in other.items()})
    mine = {url: _page(url, html_page("Mine", "/z")) for url in (a, b, c)}
    landed = land_batch(db, "b3", [FrontierURL("c1", url, 0) for url in mine], mine,
                        {url: parse_html(r.body, url) for url, r in mine.items()}, known=known)
    assert landed.new_versions == 3
    assert db.query("SELECT url, version FROM pages WHERE batch_id = 'b3' ORDER BY url") == [(a, 3), (b, 2), (c, 1)]
    # Once maintenance has expired the reader's snapshot, landing reads the whole table.
    with db.exclusive() as con:
        con.execute("CALL ducklake_expire_snapshots(?, older_than => now())", [db.alias])
    with db.read() as con:
        assert versions_since(con, known, [a]) is None
    newer = _page(a, html_page("Newer", "/w"))
    land_batch(db, "b4", [FrontierURL("c1", a, 0)], {a: newer}, {a: parse_html(newer.body, a)}, known=known)
    assert db.query("SELECT version, title FROM pages JOIN documents USING (url, version) WHERE url = ? "
                    "ORDER BY version", [a]) == [(1, "A"), (2, "Other"), (3, "Mine"), (4, "Newer")]


def test_a_parse_error_and_cut_links_land_on_the_pages_document(db):
    failed_url, cut_url = "http://127.0.0.1:9/failed", "http://127.0.0.1:9/cut"
    failed, cut = _page(failed_url, b"<title>x</title>"), _page(cut_url, html_page("Cut", "/a", "/b", "/c"))
    parsed = {failed_url: ParsedPage(None, "", (), "utf-8", None, error="TypeError: no bytes"),
              cut_url: parse_html(cut.body, cut_url, max_links=2)}
    land_batch(db, "b1", [FrontierURL("c1", failed_url, 0), FrontierURL("c1", cut_url, 0)],
               {failed_url: failed, cut_url: cut}, parsed)
    assert db.query("SELECT url, title, text, parse_error, links_truncated FROM documents ORDER BY url") == [
        (cut_url, "Cut", "Cut Cut /a /b /c", None, True), (failed_url, None, "", "TypeError: no bytes", False)]
    assert db.query("SELECT dst_url FROM links ORDER BY dst_url") == [("http://127.0.0.1:9/a",),
                                                                     ("http://127.0.0.1:9/b",)]
    assert db.query("SELECT url, outcome FROM batch_items ORDER BY url") == [(cut_url, "fetched"),
                                                                            (failed_url, "fetched")]

