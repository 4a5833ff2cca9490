"""The DuckDB store, landing and the frontier (crawl_platform.store, .landing, .frontier, .crawl),
on a real DuckDB file and the real embedded broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import pytest

from crawl_platform.batching import batch_key, plan_batches
from crawl_platform.broker import free_port
from crawl_platform.bus import KafkaBus, OffsetRange
from crawl_platform.crawl import BatchCrawler, SeedIntake
from crawl_platform.demo_site import DemoSite
from crawl_platform.fetcher import Fetcher, FetchResult
from crawl_platform.frontier import Frontier
from crawl_platform.landing import land_batch
from crawl_platform.messages import CrawlRequest, FrontierURL, decode_frontier_url, encode
from crawl_platform.parser import parse_html
from crawl_platform.store import CrawlStore, StoreBusyError
from crawl_platform.urls import InvalidURLError

TABLES = ("pages", "documents", "links", "batch_items")


@pytest.fixture
def frontier(store, bus) -> Frontier:
    return Frontier(store, bus)


def _request(crawl_id: str, *seeds: str, max_pages: int = 100, max_depth: int = 5,
             scope: str = "host") -> CrawlRequest:
    return CrawlRequest(crawl_id, seeds, max_pages, max_depth, scope, time.time())  # type: ignore[arg-type]


def _counts(store: CrawlStore) -> dict[str, int]:
    return {t: store.query(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


def _frontier_rows(store: CrawlStore, crawl_id: str) -> dict[str, tuple[int, str]]:
    rows = store.query("SELECT url, depth, state FROM frontier WHERE crawl_id = ?", [crawl_id])
    return {url: (depth, state) for url, depth, state in rows}


def _topic(bus: KafkaBus) -> list[FrontierURL]:
    out = []
    for part, (low, high) in bus.watermarks(bus.frontier_topic).items():
        if high > low:
            out += [decode_frontier_url(r.value)
                    for r in bus.read_range(bus.frontier_topic, OffsetRange(part, low, high))]
    return out


def _result(url: str, body: bytes = b"", status: int | None = 200, *, error: str | None = None,
            disallowed: bool = False, content_type: str = "text/html") -> FetchResult:
    return FetchResult(url, url, status, content_type if status else None, body, error,
                       datetime.now(UTC).replace(tzinfo=None), 1.0, disallowed)


def _html(title: str, *hrefs: str) -> bytes:
    links = "".join(f'<a href="{h}">to {h}</a>' for h in hrefs)
    return f"<html><head><title>{title}</title></head><body><p>{title} text</p>{links}</body></html>".encode()


def _land(store: CrawlStore, batch_id: str, items: list[FrontierURL], results: list[FetchResult]):
    by_url = {r.url: r for r in results}
    parsed = {r.url: parse_html(r.body, r.final_url, r.content_type) for r in results if r.is_html}
    return land_batch(store, batch_id, items, by_url, parsed)


# --- register ------------------------------------------------------------------------------------

def test_register_admits_canonical_seeds_and_publishes_them(frontier, store, bus):
    growth = frontier.register(_request(
        "c1", "http://a.example/", "HTTP://A.example:80/#top", "http://b.example/x?b=2&a=1"))
    assert (growth.admitted, growth.published, growth.unconfirmed) == (2, 2, 0)
    assert _frontier_rows(store, "c1") == {
        "http://a.example/": (0, "queued"),
        "http://b.example/x?a=1&b=2": (0, "queued"),
    }
    assert set(_topic(bus)) == {FrontierURL("c1", "http://a.example/", 0),
                                FrontierURL("c1", "http://b.example/x?a=1&b=2", 0)}
    assert len(_topic(bus)) == 2
    (status,) = frontier.status("c1")
    assert (status.pending, status.fetched, status.failed, status.disallowed) == (2, 0, 0, 0)


def test_register_is_idempotent(frontier, store, bus):
    request = _request("c1", "http://a.example/", "http://a.example/2")
    frontier.register(request)
    again = frontier.register(request)
    assert again.admitted == 0
    assert store.query("SELECT count(*) FROM crawls") == [(1,)]
    assert len(_frontier_rows(store, "c1")) == 2
    assert len(_topic(bus)) == 2


def test_register_admits_no_more_seeds_than_max_pages(frontier, store):
    growth = frontier.register(_request("c1", "http://a.example/1", "http://a.example/2",
                                        "http://a.example/3", max_pages=2))
    assert growth.admitted == 2
    assert len(_frontier_rows(store, "c1")) == 2


def test_register_with_a_bad_seed_stores_nothing(frontier, store):
    with pytest.raises(InvalidURLError):
        frontier.register(_request("c1", "http://a.example/", "ftp://files.example/"))
    assert store.query("SELECT count(*) FROM crawls") == [(0,)]
    assert _frontier_rows(store, "c1") == {}


# --- land_batch --------------------------------------------------------------------------------------

def test_same_content_twice_is_one_version(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    first = _land(store, "b1", item, [_result(url, _html("P", "/x"))])
    second = _land(store, "b2", item, [_result(url, _html("P", "/x"))])
    assert (first.new_versions, second.new_versions) == (1, 0)
    assert store.query("SELECT url, version, batch_id FROM pages") == [(url, 1, "b1")]
    assert store.query("SELECT count(*) FROM documents") == [(1,)]


def test_changed_content_is_a_new_version_with_its_own_documents_and_links(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    _land(store, "b1", item, [_result(url, _html("Old", "/x", "/y"))])
    landed = _land(store, "b2", item, [_result(url, _html("New", "/z"))])
    assert landed.new_versions == 1
    assert landed.links == 1
    assert store.query("SELECT version, batch_id FROM pages ORDER BY version") == [(1, "b1"), (2, "b2")]
    assert store.query("SELECT version, title FROM documents ORDER BY version") == [(1, "Old"), (2, "New")]
    assert store.query("SELECT src_version, dst_url FROM links ORDER BY src_version, dst_url") == [
        (1, "http://a.example/x"), (1, "http://a.example/y"), (2, "http://a.example/z")]


def test_a_status_change_is_a_new_version(store):
    url = "http://a.example/p"
    item = [FrontierURL("c1", url, 0)]
    _land(store, "b1", item, [_result(url, _html("P"))])
    _land(store, "b2", item, [_result(url, _html("P"), status=404)])
    assert store.query("SELECT version, status FROM pages ORDER BY version") == [(1, 200), (2, 404)]


def test_landing_the_same_batch_twice_adds_no_rows(store):
    items = [FrontierURL("c1", f"http://a.example/{k}", 1) for k in range(3)]
    results = [_result(i.url, _html(f"T{k}", "/a", "/b")) for k, i in enumerate(items)]
    _land(store, "b1", items, results)
    before = _counts(store)
    again = _land(store, "b1", items, results)
    assert again.new_versions == 0
    assert _counts(store) == before
    assert before == {"pages": 3, "documents": 3, "links": 6, "batch_items": 3}


def test_failures_land_with_their_error_and_disallowed_pages_do_not_land(store):
    items = [FrontierURL("c1", f"http://a.example/{n}", 0) for n in ("ok", "gone", "down", "secret")]
    _land(store, "b1", items, [
        _result("http://a.example/ok", _html("OK")),
        _result("http://a.example/gone", _html("Not found"), status=404),
        _result("http://a.example/down", status=None, error="ConnectionError: refused"),
        _result("http://a.example/secret", status=None, error="disallowed by robots.txt", disallowed=True),
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


# --- expand ------------------------------------------------------------------------------------------

def test_expand_admits_in_scope_unknown_links_up_to_max_pages_exactly(frontier, store, bus):
    frontier.register(_request("c1", "http://a.example/", max_pages=6, max_depth=3))
    seed = FrontierURL("c1", "http://a.example/", 0)
    links = [f"/{k}" for k in range(1, 9)] + ["http://other.example/x", "/", "mailto:x@a.example"]
    _land(store, "b1", [seed], [_result(seed.url, _html("Home", *links))])

    growth = frontier.expand("b1")
    assert (growth.admitted, growth.published) == (5, 5)
    rows = _frontier_rows(store, "c1")
    assert rows == {
        "http://a.example/": (0, "fetched"),
        **{f"http://a.example/{k}": (1, "queued") for k in range(1, 6)},
    }
    assert len(_topic(bus)) == 6  # the seed and the five admitted links

    # The crawl is full: more links admit nothing.
    child = FrontierURL("c1", "http://a.example/1", 1)
    _land(store, "b2", [child], [_result(child.url, _html("One", "/9", "/10"))])
    assert frontier.expand("b2").admitted == 0
    assert len(_frontier_rows(store, "c1")) == 6


def test_expand_respects_max_depth_and_skips_known_urls(frontier, store):
    frontier.register(_request("c1", "http://a.example/", max_depth=2))
    seed = FrontierURL("c1", "http://a.example/", 0)
    _land(store, "b1", [seed], [_result(seed.url, _html("Home", "/a", "/b"))])
    assert frontier.expand("b1").admitted == 2

    a = FrontierURL("c1", "http://a.example/a", 1)
    _land(store, "b2", [a], [_result(a.url, _html("A", "/", "/b", "/c"))])
    growth = frontier.expand("b2")
    assert growth.admitted == 1  # /c; the seed and /b are already known
    assert _frontier_rows(store, "c1")["http://a.example/c"] == (2, "queued")

    c = FrontierURL("c1", "http://a.example/c", 2)
    _land(store, "b3", [c], [_result(c.url, _html("C", "/d"))])
    assert frontier.expand("b3").admitted == 0  # /d would be at depth 3
    assert "http://a.example/d" not in _frontier_rows(store, "c1")


def test_expand_in_domain_scope_follows_sibling_subdomains(frontier, store):
    frontier.register(_request("c1", "http://www.example.co.uk/", scope="domain"))
    seed = FrontierURL("c1", "http://www.example.co.uk/", 0)
    _land(store, "b1", [seed], [_result(seed.url, _html(
        "Home", "http://shop.example.co.uk/", "http://other.co.uk/", "http://example.com/"))])
    frontier.expand("b1")
    assert set(_frontier_rows(store, "c1")) == {"http://www.example.co.uk/", "http://shop.example.co.uk/"}


def test_expand_closes_every_item_so_nothing_stays_pending(frontier, store):
    urls = ["http://a.example/ok", "http://a.example/gone", "http://a.example/down", "http://a.example/secret"]
    frontier.register(_request("c1", *urls, max_depth=0))
    assert frontier.status("c1")[0].pending == 4
    _land(store, "b1", [FrontierURL("c1", u, 0) for u in urls], [
        _result(urls[0], _html("OK", "/more")),
        _result(urls[1], _html("Not found"), status=404),
        _result(urls[2], status=None, error="ConnectionError: refused"),
        _result(urls[3], status=None, error="disallowed by robots.txt", disallowed=True),
    ])
    frontier.expand("b1")
    (status,) = frontier.status("c1")
    assert (status.pending, status.fetched, status.failed, status.disallowed) == (0, 1, 2, 1)
    assert {u: s for u, (_, s) in _frontier_rows(store, "c1").items()} == {
        urls[0]: "fetched", urls[1]: "failed", urls[2]: "failed", urls[3]: "disallowed"}
    assert store.query("SELECT DISTINCT batch_id FROM frontier") == [("b1",)]


# --- re-publishing -------------------------------------------------------------------------------------

def _unreachable_bus(settings) -> KafkaBus:
    return KafkaBus({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, settings.seeds_topic,
                    settings.frontier_topic, settings.dead_letter_topic, settings.topic_partitions,
                    timeout_s=1.0)


def test_republish_stale_publishes_urls_the_broker_never_confirmed(settings, store, bus):
    offline = Frontier(store, _unreachable_bus(settings))
    growth = offline.register(_request("c1", "http://a.example/", "http://a.example/2"))
    assert (growth.admitted, growth.published, growth.unconfirmed) == (2, 0, 2)
    assert {s for _, s in _frontier_rows(store, "c1").values()} == {"discovered"}

    online = Frontier(store, bus)
    assert online.republish_stale().published == 0  # not stale yet: maybe still in flight
    growth = online.republish_stale(older_than_s=0)
    assert growth.published == 2
    assert {s for _, s in _frontier_rows(store, "c1").values()} == {"queued"}
    assert sorted(u.url for u in _topic(bus)) == ["http://a.example/", "http://a.example/2"]


def test_republish_stale_does_not_depend_on_the_machine_time_zone(settings, store, bus):
    script = textwrap.dedent(
        """
        from datetime import UTC, datetime, timedelta
        from crawl_platform.bus import KafkaBus
        from crawl_platform.config import Settings
        from crawl_platform.frontier import Frontier
        from crawl_platform.store import CrawlStore

        settings = Settings()
        store = CrawlStore.from_settings(settings)
        old = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=120)
        with store.write() as con:
            con.execute("INSERT INTO crawls (crawl_id, seeds, scope, max_pages, max_depth, submitted_at, "
                        "registered_at) VALUES ('c1', ['http://a.example/'], 'host', 10, 1, ?, ?)",
                        [old, old])
            con.execute("INSERT INTO frontier VALUES ('http://a.example/', 'c1', 0, 'discovered', ?, "
                        "'a.example', ?, NULL)", [old, old])
        print(Frontier(store, KafkaBus.from_settings(settings)).republish_stale(older_than_s=30).published)
        """
    )
    env = {**os.environ, **settings.to_env(), "TZ": "America/New_York"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"  # a URL left 'discovered' for two minutes is re-published


def test_requeue_all_pending_publishes_every_unfinished_url(frontier, store, bus):
    urls = ["http://a.example/1", "http://a.example/2", "http://a.example/3"]
    frontier.register(_request("c1", *urls, max_depth=0))
    _land(store, "b1", [FrontierURL("c1", urls[0], 0)], [_result(urls[0], _html("One"))])
    frontier.expand("b1")

    growth = frontier.requeue_all_pending()
    assert growth.published == 2
    published = [u.url for u in _topic(bus)]
    assert sorted(published) == sorted([*urls, urls[1], urls[2]])  # first pass, then the unfinished two


# --- seed intake -----------------------------------------------------------------------------------------

def _seed_payload(crawl_id: str, **overrides) -> bytes:
    body = json.loads(encode(_request(crawl_id, "http://a.example/")))
    return json.dumps(body | overrides).encode()


def _publish_seeds(bus: KafkaBus, payloads: list[bytes]) -> OffsetRange:
    assert all(bus.publish(bus.seeds_topic, [(b"same-key", p) for p in payloads]))
    (part,) = [p for p, (_, high) in bus.watermarks(bus.seeds_topic).items() if high]
    return OffsetRange(part, 0, len(payloads))


def _dead_letters(bus: KafkaBus) -> int:
    return sum(high for _, high in bus.watermarks(bus.dead_letter_topic).values())


def test_seed_intake_registers_good_requests_and_dead_letters_bad_ones(store, bus):
    offsets = _publish_seeds(bus, [
        _seed_payload("good-1"),
        b"{not json",
        _seed_payload("bad-seed", seeds=["ftp://files.example/"]),
        _seed_payload("good-2"),
    ])
    report = SeedIntake(bus, store).register(offsets)
    assert report.crawls == ["good-1", "good-2"]
    assert report.dead_letters == 2
    assert _dead_letters(bus) == 2
    assert {r[0] for r in store.query("SELECT crawl_id FROM crawls")} == {"good-1", "good-2"}


@pytest.mark.parametrize("override", [{"max_pages": 2**40}, {"max_depth": 2**40},
                                      {"submitted_at": float("nan")}, {"submitted_at": 1e300}])
def test_seed_intake_dead_letters_requests_the_store_cannot_hold(store, bus, override):
    offsets = _publish_seeds(bus, [_seed_payload("good-1"), _seed_payload("huge", **override),
                                   _seed_payload("good-2")])
    report = SeedIntake(bus, store).register(offsets)
    assert report.crawls == ["good-1", "good-2"]
    assert report.dead_letters == 1


# --- locking -----------------------------------------------------------------------------------------------

_HOLD_WRITE = textwrap.dedent(
    """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1])
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    con.close()
    """
)


def _hold_write_lock(path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_WRITE, str(path), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_reader_waits_for_another_process_holding_the_write_lock(store):
    holder = _hold_write_lock(store.path, 1.0)
    try:
        started = time.monotonic()
        assert store.query("SELECT count(*) FROM crawls") == [(0,)]
        waited = time.monotonic() - started
    finally:
        holder.wait(10)
    assert waited >= 0.5  # it really waited for the other process, then succeeded


def test_writer_waits_for_another_process_holding_the_write_lock(store, frontier):
    holder = _hold_write_lock(store.path, 1.0)
    try:
        started = time.monotonic()
        frontier.register(_request("c1", "http://a.example/"))
        waited = time.monotonic() - started
    finally:
        holder.wait(10)
    assert waited >= 0.5
    assert len(_frontier_rows(store, "c1")) == 1


def test_store_busy_error_when_the_lock_outlasts_the_timeout(store):
    impatient = CrawlStore(store.path, lock_timeout_s=0.1)
    holder = _hold_write_lock(store.path, 0.6)
    try:
        started = time.monotonic()
        with pytest.raises(StoreBusyError) as caught:
            impatient.query("SELECT count(*) FROM crawls")
        assert time.monotonic() - started < 0.5
    finally:
        holder.wait(10)
    assert str(store.path) in str(caught.value)


# --- a whole crawl --------------------------------------------------------------------------------

def _run_crawl(settings, bus, store, request: CrawlRequest) -> BatchCrawler:
    fetcher = Fetcher(settings.user_agent, host_delay_s=0.0, allowed_networks=["127.0.0.0/8"])
    crawler = BatchCrawler(bus, store, fetcher, "lxml")
    crawler.frontier.register(request)
    cursor: dict[int, int] = {}
    for _tick in range(200):
        plan = plan_batches(bus.watermarks(bus.frontier_topic), cursor, settings.batch_size, max_batches=8)
        cursor = plan.cursor
        for offsets in plan.ranges:
            key = batch_key(0, offsets)
            report = crawler.fetch_and_land(key, offsets, refetch_done=False)
            assert report.dead_letters == 0
            crawler.expand(key)
        if not plan.ranges and crawler.frontier.status(request.crawl_id)[0].pending == 0:
            return crawler
    raise AssertionError("the crawl did not finish")


def test_crawl_of_the_demo_site_lands_exactly_the_expected_pages_once(settings, bus, store, site):
    _run_crawl(settings, bus, store, _request("demo", site.base_url + "/", max_pages=10_000, max_depth=100))

    expected = DemoSite(120, seed=7).expected_urls(site.base_url)
    landed = [r[0] for r in store.query("SELECT url FROM pages")]
    assert sorted(landed) == sorted(expected)  # each exactly once, no more versions
    (status,) = Frontier(store, bus).status("demo")
    assert status.pending == 0
    assert status.disallowed >= 1  # the /private/ pages it found but never fetched
    # The server records a request just after answering it: let the last record arrive.
    deadline = time.monotonic() + 2.0
    while len(site.requests) < len(expected) + 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.02)
    assert all(site.request_count(p) == 0 for p in ("/private/0", "/private/1", "/private/2"))
    # Every page was requested once (/page/1 also once more through the /old-home redirect).
    for url in expected:
        path = url[len(site.base_url):]
        assert site.request_count(path) == (2 if path == "/page/1" else 1), path
    assert site.request_count("/robots.txt") == 1


def test_crawl_stops_at_max_pages(settings, bus, store, site):
    _run_crawl(settings, bus, store, _request("small", site.base_url + "/", max_pages=10, max_depth=100))
    rows = _frontier_rows(store, "small")
    assert len(rows) == 10
    assert {state for _, state in rows.values()} <= {"fetched", "failed", "disallowed"}
    landed = {r[0] for r in store.query("SELECT url FROM pages")}
    assert landed <= set(rows)
    assert len(site.requests) <= 10 + 1 + 1  # the admitted pages, robots.txt, a redirect hop
