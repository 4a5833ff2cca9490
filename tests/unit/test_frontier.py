"""The frontier (crawl_platform.frontier): registering crawls, expanding landed batches into new URLs,
re-publishing what the broker never confirmed, and the read model that needs no bus; on a real DuckDB
file and the embedded broker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.frontier.admission import LINK_OUTCOMES, RegistrationConflictError
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.control import build_control
from crawl_platform.store.frontier import link_targets
from crawl_platform.urls import InvalidURLError
from tests.unit.crawl_rows import crawl_request, fetch_result, frontier_rows, land, page_html, topic_messages

# --- register ------------------------------------------------------------------------------------

def test_register_admits_canonical_seeds_and_publishes_them(frontier, store, bus):
    growth = frontier.register(crawl_request(
        "c1", "http://a.example/", "HTTP://A.example:80/#top", "http://b.example/x?b=2&a=1"))
    assert (growth.admitted, growth.published, growth.unconfirmed) == (2, 2, 0)
    assert frontier_rows(store, "c1") == {
        "http://a.example/": (0, "queued"),
        "http://b.example/x?a=1&b=2": (0, "queued"),
    }
    assert set(topic_messages(bus)) == {FrontierURL("c1", "http://a.example/", 0),
                                FrontierURL("c1", "http://b.example/x?a=1&b=2", 0)}
    assert len(topic_messages(bus)) == 2
    (status,) = frontier.status("c1")
    assert (status.pending, status.fetched, status.failed, status.disallowed) == (2, 0, 0, 0)


def test_register_is_idempotent(frontier, store, bus, monkeypatch):
    request = crawl_request("c1", "http://a.example/", "http://a.example/2")
    frontier.register(request)
    writes = []
    write = store.write
    monkeypatch.setattr(store, "write", lambda: writes.append(1) or write())
    again = frontier.register(request)
    assert again.admitted == 0
    assert not writes  # a request delivered again takes no write transaction (nor the lake's write lock)
    assert store.query("SELECT count(*) FROM crawls") == [(1,)]
    assert len(frontier_rows(store, "c1")) == 2
    assert len(topic_messages(bus)) == 2


def test_register_again_with_other_seeds_or_scope_is_refused_and_changes_nothing(frontier, store):
    frontier.register(crawl_request("c1", "http://a.example/"))
    with pytest.raises(RegistrationConflictError) as caught:
        frontier.register(crawl_request("c1", "http://a.example/", "http://a.example/2"))
    assert str(caught.value) == "crawl c1 is registered already with other seeds: submit it under a new id"
    with pytest.raises(RegistrationConflictError) as caught:
        frontier.register(crawl_request("c1", "http://a.example/", scope="any", max_pages=7))
    assert str(caught.value) == ("crawl c1 is registered already with other max_pages, scope: "
                                 "submit it under a new id")
    assert set(frontier_rows(store, "c1")) == {"http://a.example/"}
    assert store.query("SELECT count(*) FROM crawls") == [(1,)]
    assert frontier.register(crawl_request("c1", "http://a.example/")).admitted == 0  # the same again: a no-op


def test_a_pass_must_be_of_a_registered_family_with_its_options(frontier, store):
    with pytest.raises(RegistrationConflictError) as caught:
        frontier.register(crawl_request("victim@x", "http://evil.example/"))
    assert str(caught.value) == ("crawl victim@x: '@' is reserved for the passes of recurring crawls, and there "
                                 "is no crawl victim")
    frontier.register(crawl_request("victim", "http://a.example/"))
    with pytest.raises(RegistrationConflictError) as caught:
        frontier.register(crawl_request("victim@x", "http://evil.example/"))
    assert str(caught.value) == ("crawl victim@x: a pass of the recurring crawl victim keeps its options, "
                                 "and these differ")
    assert frontier.register(crawl_request("victim@20261207", "http://a.example/")).admitted == 1  # its pass
    assert [r[0] for r in store.query("SELECT crawl_id FROM crawls ORDER BY crawl_id")] == [
        "victim", "victim@20261207"]


def test_register_admits_no_more_seeds_than_max_pages(frontier, store):
    growth = frontier.register(crawl_request("c1", "http://a.example/1", "http://a.example/2",
                                             "http://a.example/3", max_pages=2))
    assert growth.admitted == 2
    assert len(frontier_rows(store, "c1")) == 2


def test_register_with_a_bad_seed_stores_nothing(frontier, store):
    with pytest.raises(InvalidURLError):
        frontier.register(crawl_request("c1", "http://a.example/", "ftp://files.example/"))
    assert store.query("SELECT count(*) FROM crawls") == [(0,)]
    assert frontier_rows(store, "c1") == {}
# --- expand ------------------------------------------------------------------------------------------

def test_expand_admits_in_scope_unknown_links_up_to_max_pages_exactly(frontier, store, bus):
    frontier.register(crawl_request("c1", "http://a.example/", max_pages=6, max_depth=3))
    seed = FrontierURL("c1", "http://a.example/", 0)
    links = [f"/{k}" for k in range(1, 9)] + ["http://other.example/x", "/", "mailto:x@a.example"]
    land(store, "b1", [seed], [fetch_result(seed.url, page_html("Home", *links))])

    growth = frontier.expand("b1")
    assert (growth.admitted, growth.published) == (5, 5)
    rows = frontier_rows(store, "c1")
    assert rows == {
        "http://a.example/": (0, "fetched"),
        **{f"http://a.example/{k}": (1, "queued") for k in range(1, 6)},
    }
    assert len(topic_messages(bus)) == 6  # the seed and the five admitted links

    # The crawl is full: more links admit nothing.
    child = FrontierURL("c1", "http://a.example/1", 1)
    land(store, "b2", [child], [fetch_result(child.url, page_html("One", "/9", "/10"))])
    assert frontier.expand("b2").admitted == 0
    assert len(frontier_rows(store, "c1")) == 6


def test_expand_respects_max_depth_and_skips_known_urls(frontier, store):
    frontier.register(crawl_request("c1", "http://a.example/", max_depth=2))
    seed = FrontierURL("c1", "http://a.example/", 0)
    land(store, "b1", [seed], [fetch_result(seed.url, page_html("Home", "/a", "/b"))])
    assert frontier.expand("b1").admitted == 2

    a = FrontierURL("c1", "http://a.example/a", 1)
    land(store, "b2", [a], [fetch_result(a.url, page_html("A", "/", "/b", "/c"))])
    growth = frontier.expand("b2")
    assert growth.admitted == 1  # /c; the seed and /b are already known
    assert frontier_rows(store, "c1")["http://a.example/c"] == (2, "queued")

    c = FrontierURL("c1", "http://a.example/c", 2)
    land(store, "b3", [c], [fetch_result(c.url, page_html("C", "/d"))])
    assert frontier.expand("b3").admitted == 0  # /d would be at depth 3
    assert "http://a.example/d" not in frontier_rows(store, "c1")


def test_expand_reads_each_page_s_links_from_the_batch_that_landed_its_latest_version(frontier, store):
    """A batch's links are read by ``links.batch_id``: a changed page's from this batch, an unchanged
    page's from the older batch that landed its version, and rows landed before the lake had the
    column (NULL there) still count."""
    frontier.register(crawl_request("c1", "http://a.example/", max_depth=5))
    home, a, b = (FrontierURL("c1", f"http://a.example/{p}", d) for p, d in (("", 0), ("a", 1), ("b", 1)))
    land(store, "b1", [home], [fetch_result(home.url, page_html("Home", "/a", "/b"))])
    with store.write() as con:  # the lake as it was before links had a batch_id
        con.execute("ALTER TABLE links DROP COLUMN batch_id")
    store.close()  # opened again, it gains the column, NULL in b1's rows
    land(store, "b2", [a, b], [fetch_result(a.url, page_html("A", "/a1")), fetch_result(b.url, page_html("B", "/b1"))])
    assert store.query("SELECT src_url, batch_id FROM links ORDER BY ALL") == [
        (home.url, None), (home.url, None), (a.url, "b2"), (b.url, "b2")]
    # Home and /a come back unchanged (their versions landed in b1 and b2), /b changed.
    land(store, "b3", [home, a, b], [fetch_result(home.url, page_html("Home", "/a", "/b")),
                                     fetch_result(a.url, page_html("A", "/a1")),
                                     fetch_result(b.url, page_html("B changed", "/b2"))])
    assert store.query("SELECT url, version, batch_id FROM pages WHERE batch_id = 'b3'") == [(b.url, 2, "b3")]
    with store.read() as con:
        targets = link_targets(con, "b3", LINK_OUTCOMES)
    assert sorted(targets) == [("c1", "http://a.example/a", 1), ("c1", "http://a.example/a1", 2),
                               ("c1", "http://a.example/b", 1), ("c1", "http://a.example/b2", 2)]
    assert frontier.expand("b3").admitted == 4  # every target is new to the crawl's frontier


def test_expand_in_domain_scope_follows_sibling_subdomains(frontier, store):
    frontier.register(crawl_request("c1", "http://www.example.co.uk/", scope="domain"))
    seed = FrontierURL("c1", "http://www.example.co.uk/", 0)
    land(store, "b1", [seed], [fetch_result(seed.url, page_html(
        "Home", "http://shop.example.co.uk/", "http://other.co.uk/", "http://example.com/"))])
    frontier.expand("b1")
    assert set(frontier_rows(store, "c1")) == {"http://www.example.co.uk/", "http://shop.example.co.uk/"}


def test_expand_closes_every_item_so_nothing_stays_pending(frontier, store):
    urls = ["http://a.example/ok", "http://a.example/gone", "http://a.example/down", "http://a.example/secret"]
    frontier.register(crawl_request("c1", *urls, max_depth=0))
    assert frontier.status("c1")[0].pending == 4
    land(store, "b1", [FrontierURL("c1", u, 0) for u in urls], [
        fetch_result(urls[0], page_html("OK", "/more")),
        fetch_result(urls[1], page_html("Not found"), status=404),
        fetch_result(urls[2], status=None, error="ConnectionError: refused"),
        fetch_result(urls[3], status=None, error="disallowed by robots.txt", disallowed=True),
    ])
    frontier.expand("b1")
    (status,) = frontier.status("c1")
    assert (status.pending, status.fetched, status.failed, status.disallowed) == (0, 1, 2, 1)
    assert {u: s for u, (_, s) in frontier_rows(store, "c1").items()} == {
        urls[0]: "fetched", urls[1]: "failed", urls[2]: "failed", urls[3]: "disallowed"}
    assert store.query("SELECT DISTINCT batch_id FROM frontier") == [("b1",)]


def test_status_counts_each_crawl_s_own_urls_in_registration_order(frontier, store):
    frontier.register(crawl_request("c1", "http://a.example/1", "http://a.example/2", "http://a.example/3",
                                    max_depth=0))
    frontier.register(crawl_request("c2", "http://b.example/1", "http://b.example/2", max_depth=0))
    frontier.register(crawl_request("c3", "http://c.example/1", max_depth=0))
    land(store, "b1", [FrontierURL("c1", "http://a.example/1", 0), FrontierURL("c1", "http://a.example/2", 0)],
         [fetch_result("http://a.example/1", page_html("One")),
          fetch_result("http://a.example/2", status=None, error="ConnectionError: refused")])
    frontier.expand("b1")
    frontier.control(build_control("c2", "pause"))
    frontier.control(build_control("c3", "cancel"))

    by_crawl = {s.crawl_id: s for s in frontier.status()}
    assert list(by_crawl) == ["c1", "c2", "c3"]
    counts = {c: (s.pending, s.fetched, s.failed, s.disallowed, s.paused, s.cancelled) for c, s in by_crawl.items()}
    assert counts == {"c1": (1, 1, 1, 0, 0, 0), "c2": (0, 0, 0, 0, 2, 0), "c3": (0, 0, 0, 0, 0, 1)}
    assert {c: s.state for c, s in by_crawl.items()} == {"c1": "active", "c2": "paused", "c3": "cancelled"}
    # The latest change of a row no longer pending: c1's landing, c2's pause, c3's cancel.
    last = dict(store.query("SELECT crawl_id, max(updated_at) FROM frontier WHERE state <> 'queued' GROUP BY ALL"))
    assert {c: s.last_update for c, s in by_crawl.items()} == last
    assert frontier.status("c2") == [by_crawl["c2"]]


# --- re-publishing -------------------------------------------------------------------------------------

def _unreachable_bus(settings) -> KafkaBus:
    return KafkaBus({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, settings.seeds_topic,
                    settings.frontier_topic, settings.dead_letter_topic, settings.topic_partitions,
                    timeout_s=1.0)


def test_republish_stale_publishes_urls_the_broker_never_confirmed(settings, store, bus):
    offline = Frontier(store, _unreachable_bus(settings))
    growth = offline.register(crawl_request("c1", "http://a.example/", "http://a.example/2"))
    assert (growth.admitted, growth.published, growth.unconfirmed) == (2, 0, 2)
    assert {s for _, s in frontier_rows(store, "c1").values()} == {"discovered"}

    online = Frontier(store, bus)
    assert online.republish_stale().published == 0  # not stale yet: maybe still in flight
    growth = online.republish_stale(older_than_s=0)
    assert growth.published == 2
    assert {s for _, s in frontier_rows(store, "c1").values()} == {"queued"}
    assert sorted(u.url for u in topic_messages(bus)) == ["http://a.example/", "http://a.example/2"]


def test_republish_stale_does_not_depend_on_the_machine_time_zone(settings, store, bus):
    script = textwrap.dedent(
        """
        from datetime import UTC, datetime, timedelta
        from crawl_platform.bus.kafka import KafkaBus
        from crawl_platform.config import Settings
        from crawl_platform.frontier.frontier import Frontier
        from crawl_platform.store.database import CrawlStore

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
    frontier.register(crawl_request("c1", *urls, max_depth=0))
    land(store, "b1", [FrontierURL("c1", urls[0], 0)], [fetch_result(urls[0], page_html("One"))])
    frontier.expand("b1")

    growth = frontier.requeue_all_pending()
    assert growth.published == 2
    published = [u.url for u in topic_messages(bus)]
    assert sorted(published) == sorted([*urls, urls[1], urls[2]])  # first pass, then the unfinished two


# --- the read model ------------------------------------------------------------------------------------

def test_read_model_answers_from_the_store_alone(frontier, store):
    urls = ["http://a.example/1", "http://a.example/2"]
    frontier.register(crawl_request("c1", *urls, max_depth=0))
    land(store, "b1", [FrontierURL("c1", urls[0], 0)], [fetch_result(urls[0], page_html("One"))])
    frontier.expand("b1")

    reads = FrontierReadModel(store)
    (status,) = reads.status("c1")
    assert (status.pending, status.fetched) == (1, 1)
    assert reads.status() == frontier.status() == [status]
    assert reads.status("nope") == []
    assert reads.known_crawls({"c1", "nope"}) == {"c1"}
    assert (reads.batch_landed("b1"), reads.batch_landed("b2")) == (True, False)
    assert reads.done_urls([FrontierURL("c1", u, 0) for u in urls]) == {("c1", urls[0])}
    assert reads.orphaned_count(60) == 0  # queued just now: maybe still on its way
    assert reads.orphaned_count(-60) == 1  # the fetched one is not orphaned
    assert reads.queued_hosts() == 1
