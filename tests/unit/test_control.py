"""Crawl control (crawl_platform.frontier.control, crawl_platform.pipeline.control): cancel, pause and
resume through the engine's crawl loop, on the real broker and a demo site on loopback."""

from __future__ import annotations

import itertools
import time

import pytest

from crawl_platform.bus.messages import CrawlControl, decode_dead_letter
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.frontier.control import ControlRefusedError, UnknownCrawlError
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.control import ControlIntake, build_control, submit_control
from crawl_platform.pipeline.control_watch import ControlWatch
from crawl_platform.pipeline.loop import LoopReport
from crawl_platform.pipeline.planning import PlannedBatch
from tests.unit.crawl_rows import crawl_loop, crawl_request, fetch_batch_while_commanding, frontier_rows


def _pages(store, crawl_id: str) -> list[str]:
    return sorted(r[0] for r in store.query("SELECT url FROM pages WHERE crawl_id = ?", [crawl_id]))


def _after_first_batch(action, frontier, crawl_id: str):
    """A before_batch hook that issues ``action`` once, before the second batch."""
    seen: list[str] = []

    def hook(batch: PlannedBatch) -> None:
        seen.append(batch.key)
        if len(seen) == 2:
            frontier.control(build_control(crawl_id, action))
    return hook


def test_cancel_drops_the_queued_urls_and_admits_no_new_ones(settings, bus, store):
    with DemoSite(n_pages=40, seed=3).serve() as server:
        loop = crawl_loop(settings, bus, store, batch_size=5)
        frontier = loop.crawler.frontier
        loop.before_batch = _after_first_batch("cancel", frontier, "cx")
        frontier.register(crawl_request("cx", server.base_url + "/", max_pages=1000, max_depth=50))
        report = loop.run_until_idle()
        served = sorted({r.path for r in server.requests if r.path != "/robots.txt"})
        expected = server.site.expected_urls(server.base_url)
    fetched = _pages(store, "cx")
    assert fetched == sorted(server.base_url + p for p in served)  # nothing fetched that did not land
    assert 1 <= len(fetched) <= 5  # the first batch only
    rows = frontier_rows(store, "cx")
    assert {state for _depth, state in rows.values()} == {"fetched", "cancelled"}
    assert sorted(u for u, (_d, s) in rows.items() if s == "fetched") == fetched
    assert len(rows) < len(expected)
    assert sum(b.held for b in report.batches) >= 1  # later batches met its messages and dropped them
    status = frontier.status("cx")[0]
    assert (status.state, status.pending, status.cancelled) == ("cancelled", 0, len(rows) - len(fetched))
    assert status.shown_state == "cancelled"
    # No new URL of the crawl is admitted: not from links, not from anywhere else.
    assert frontier.admit("cx", [server.base_url + "/new-after-cancel"], depth=1).admitted == 0


def test_a_batch_fetching_when_the_cancel_comes_admits_none_of_its_links(settings, bus, store):
    with DemoSite(n_pages=20, seed=5).serve() as server:
        loop = crawl_loop(settings, bus, store)
        crawler = loop.crawler
        crawler.frontier.register(crawl_request("inflight", server.base_url + "/", max_depth=5))
        topic_high = {p: hi for p, (_lo, hi) in bus.watermarks(bus.frontier_topic).items() if hi}
        ranges = [OffsetRange(p, 0, hi) for p, hi in topic_high.items()]
        prepared = crawler.prepare("b1", ranges, refetch_done=False)
        shard = crawler.fetch_shard(prepared.requests, prepared.hosts)
        crawler.frontier.control(build_control("inflight", "cancel"))  # while the batch was fetching
        crawler.land(prepared, [shard])
        growth = crawler.expand("b1")
    assert growth.admitted == 0
    assert frontier_rows(store, "inflight") == {server.base_url + "/": (0, "cancelled")}
    assert _pages(store, "inflight") == [server.base_url + "/"]  # what it fetched still lands


def test_pause_fetches_nothing_and_resume_on_the_control_topic_finishes_the_crawl(settings, bus, store):
    with DemoSite(n_pages=40, seed=3).serve() as server:
        loop = crawl_loop(settings, bus, store, batch_size=5)
        frontier = loop.crawler.frontier
        loop.before_batch = _after_first_batch("pause", frontier, "px")
        frontier.register(crawl_request("px", server.base_url + "/", max_pages=1000, max_depth=50))
        loop.run_until_idle()
        requests_while_paused = len(server.requests)
        paused_rows = frontier_rows(store, "px")
        status = frontier.status("px")[0]
        # Paused: its URLs are kept, none is fetched, and the loop has nothing left to do.
        assert {s for _d, s in paused_rows.values()} == {"fetched", "paused"}
        assert (status.state, status.pending, status.shown_state) == ("paused", 0, "paused")
        assert status.paused == sum(1 for _d, s in paused_rows.values() if s == "paused") > 0
        assert not loop.turn(LoopReport())
        assert len(server.requests) == requests_while_paused
        # Resume travels on the control topic: the loop applies it and the crawl runs to its end.
        submit_control(bus, build_control("px", "resume"))
        report = loop.run_until_idle()
        expected = server.site.expected_urls(server.base_url)
        paths = [r.path for r in server.requests if r.path != "/robots.txt"]
    assert report.controls == 1
    assert _pages(store, "px") == sorted(expected)
    assert store.query("SELECT count(*) FROM pages WHERE crawl_id = 'px'")[0][0] == len(expected)  # once each
    assert {server.base_url + p for p in paths} >= set(expected)
    status = frontier.status("px")[0]
    assert (status.state, status.pending, status.paused, status.shown_state) == ("active", 0, 0, "finished")


def test_commands_are_idempotent_stale_ones_change_nothing_and_bad_ones_are_refused(settings, bus, store):
    loop = crawl_loop(settings, bus, store)
    frontier = loop.crawler.frontier
    frontier.register(crawl_request("idem", "http://127.0.0.1:9/"))
    old_pause = build_control("idem", "pause")
    time.sleep(0.01)
    first = frontier.control(build_control("idem", "pause"))
    again = frontier.control(build_control("idem", "pause"))
    assert (first.changed, first.urls) == (True, 1)
    assert (again.changed, again.urls) == (False, 0)
    assert again.describe() == "crawl idem is already paused"
    resumed = frontier.control(build_control("idem", "resume"))
    assert (resumed.changed, resumed.published) == (True, 1)
    assert frontier_rows(store, "idem") == {"http://127.0.0.1:9/": (0, "queued")}
    stale = frontier.control(old_pause)  # issued before the resume: applied late, it changes nothing
    assert stale.stale
    assert frontier.status("idem")[0].state == "active"
    # A repeated resume is the latest command too: a pause issued before it, arriving late, is stale.
    before_repeat = build_control("idem", "pause")
    time.sleep(0.01)
    assert not frontier.control(build_control("idem", "resume")).changed
    assert frontier.control(before_repeat).stale
    assert frontier.status("idem")[0].state == "active"
    frontier.control(build_control("idem", "cancel"))
    assert frontier.control(build_control("idem", "cancel")).describe() == "crawl idem is already cancelled"
    with pytest.raises(ControlRefusedError, match=r"^crawl idem is cancelled: it cannot be resumed$"):
        frontier.control(build_control("idem", "resume"))
    with pytest.raises(UnknownCrawlError, match=r"^no crawl 'nope'$"):
        frontier.control(build_control("nope", "pause"))
    assert frontier_rows(store, "idem") == {"http://127.0.0.1:9/": (0, "cancelled")}


def test_the_control_topic_applied_twice_changes_nothing_and_dead_letters_unknown_crawls(settings, bus, store):
    loop = crawl_loop(settings, bus, store)
    loop.crawler.frontier.register(crawl_request("twice", "http://127.0.0.1:9/"))
    submit_control(bus, build_control("twice", "pause"))
    submit_control(bus, CrawlControl("ghost", "cancel", time.time()))
    intake = ControlIntake(bus, store)
    ranges = [OffsetRange(p, lo, hi) for p, (lo, hi) in bus.watermarks(bus.control_topic).items() if hi > lo]
    first = [intake.apply(r) for r in ranges]
    replay = [intake.apply(r) for r in ranges]
    assert sorted(o.describe() for rep in first for o in rep.outcomes) == [
        "crawl twice paused: 1 pending URLs kept, none fetched until resume"]
    assert [o.changed for rep in replay for o in rep.outcomes] == [False]
    assert sum(rep.dead_letters for rep in first) == 1
    letters = [decode_dead_letter(r.value) for p, (lo, hi) in bus.watermarks(bus.dead_letter_topic).items()
               if hi > lo for r in bus.read_range(bus.dead_letter_topic, OffsetRange(p, lo, hi))]
    assert [(d.reason, d.source_topic) for d in letters] == [("no crawl 'ghost'", bus.control_topic)] * 2
    assert frontier_rows(store, "twice") == {"http://127.0.0.1:9/": (0, "paused")}


def test_a_command_stored_with_a_time_ahead_of_the_clock_does_not_outrank_later_ones(settings, bus, store):
    loop = crawl_loop(settings, bus, store)
    frontier = loop.crawler.frontier
    frontier.register(crawl_request("ahead", "http://127.0.0.1:9/"))
    frontier.control(build_control("ahead", "pause"))
    with store.write() as con:  # as a lake holds a command dated in the year 2999, from before such times were refused
        con.execute("UPDATE crawls SET state_changed_at = TIMESTAMP '2999-01-01' WHERE crawl_id = 'ahead'")
    outcome = frontier.control(build_control("ahead", "resume"))
    assert (outcome.stale, outcome.after.value, outcome.changed) == (False, "active", True)
    assert frontier.status("ahead")[0].state == "active"


class _StateReads:
    """The shard's way to read its crawls' states (the lake's, through the read model), recording
    when each read ended and what it said of ``crawl_id``."""

    def __init__(self, states, crawl_id: str) -> None:
        self.states, self.crawl_id = states, crawl_id
        self.reads: list[tuple[float, str]] = []

    def __call__(self, crawl_ids: set[str]):
        got = self.states(crawl_ids)
        self.reads.append((time.monotonic(), got[self.crawl_id].value))
        return got

    def first(self, state: str) -> float:
        return next(at for at, seen in self.reads if seen == state)


def _fetch_one_batch_while(action: str, crawler, bus, store, site_a, site_b, after: int = 5):
    """Register crawls ``pa`` (site A) and ``pb`` (site B), plan one batch of both, and fetch it
    while another thread issues ``action`` on ``pa`` once site A has had ``after`` page requests;
    lands and expands the batch. Returns (the shard, its state reads, when the command committed)."""
    urls_a = sorted(site_a.site.expected_urls(site_a.base_url))
    urls_b = sorted(site_b.site.expected_urls(site_b.base_url))
    crawler.frontier.register(crawl_request("pa", *urls_a, max_pages=1000, max_depth=0))
    crawler.frontier.register(crawl_request("pb", *urls_b, max_pages=1000, max_depth=0))
    reads = _StateReads(crawler.shard_fetcher.crawl_states, "pa")
    crawler.shard_fetcher.crawl_states = reads  # read by the fetch step's watch, not by the plan
    batch = fetch_batch_while_commanding(crawler, bus, "pa", action, lambda: len(_page_requests(site_a)) >= after)
    assert len(batch.prepared.requests) == len(urls_a) + len(urls_b)
    # Crawl B lost nothing to A's command: every page of its site was requested in the batch.
    assert {site_b.base_url + r.path for r in _page_requests(site_b)} == set(urls_b)
    assert batch.report.held == len(batch.shard.held)
    assert batch.report.postponed == 0
    return batch.shard, reads, batch.issued_at


def _page_requests(site):
    return [r for r in site.requests if r.path != "/robots.txt"]


def _stopped_after(site, reads: _StateReads, issued: float, state: str) -> None:
    """Site A's requests stopped at the watch's first read after the command: the read saw the
    new state, it came at most one read interval and one request after the command, at most the
    request already in flight reached the site after it, and most of the site was never asked."""
    seen_at = reads.first(state)
    before = [at for at, _seen in reads.reads if at < issued]
    assert seen_at == min(at for at, _seen in reads.reads if at > issued)  # the first read after it
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(at for at, _seen in reads.reads))  # once a second
    assert not before or seen_at - before[-1] >= 1.0
    late = [r for r in _page_requests(site) if r.started_at > seen_at]
    assert len(late) <= 1, late  # one host, one request in flight at a time
    after = [r for r in _page_requests(site) if r.started_at > issued]
    assert len(after) < len(site.site.expected_urls(site.base_url)) // 3, len(after)


def test_a_pause_stops_a_fetching_shard_within_a_second_and_resume_fetches_the_rest_once(settings, bus, store):
    """A shard already fetching when its crawl is paused sends none of that crawl's requests once
    its watch has read the new state from the lake (at most a second later), while another crawl
    of the shard goes on; the URLs it passed over land ``skipped`` and stay ``paused``, and resume
    fetches each of them once."""
    fetcher = Fetcher(settings.user_agent, host_delay_s=0.1, allowed_networks=["127.0.0.0/8"])
    with DemoSite(n_pages=150, seed=3).serve() as site_a, DemoSite(n_pages=40, seed=4).serve() as site_b:
        loop = crawl_loop(settings, bus, store, fetcher)
        urls_a = sorted(site_a.site.expected_urls(site_a.base_url))
        shard, reads, paused_at = _fetch_one_batch_while("pause", loop.crawler, bus, store, site_a, site_b)
        _stopped_after(site_a, reads, paused_at, "paused")
        rows = frontier_rows(store, "pa")
        passed_over = {u for u, (_d, s) in rows.items() if s == "paused"}
        assert passed_over
        assert set(shard.held) == passed_over
        outcomes = dict(store.query("SELECT url, outcome FROM batch_items WHERE crawl_id = 'pa'"))
        assert {outcomes[u] for u in passed_over} == {"skipped"}  # as the plan step's held URLs land
        # The rest was requested before the pause took effect and has its outcome (a 404 fails).
        assert {s for u, (_d, s) in rows.items() if u not in passed_over} <= {"fetched", "failed"}
        assert set(rows) - passed_over <= {site_a.base_url + r.path for r in _page_requests(site_a)}
        asked = len(_page_requests(site_a))

        loop.crawler.frontier.control(build_control("pa", "resume"))
        loop.run_until_idle()
        # Exactly once: each URL the pause passed over is requested after the resume, and no other.
        again = [site_a.base_url + r.path for r in _page_requests(site_a)[asked:]]
        assert sorted(again) == sorted(passed_over)
    assert _pages(store, "pa") == urls_a
    assert store.query("SELECT count(*) FROM pages WHERE crawl_id = 'pa'")[0][0] == len(urls_a)
    assert {s for _d, s in frontier_rows(store, "pa").values()} <= {"fetched", "failed"}


def test_a_cancel_stops_a_fetching_shard_within_a_second_and_its_urls_stay_cancelled(settings, bus, store):
    fetcher = Fetcher(settings.user_agent, host_delay_s=0.1, allowed_networks=["127.0.0.0/8"])
    with DemoSite(n_pages=150, seed=5).serve() as site_a, DemoSite(n_pages=40, seed=6).serve() as site_b:
        loop = crawl_loop(settings, bus, store, fetcher)
        shard, reads, cancelled_at = _fetch_one_batch_while("cancel", loop.crawler, bus, store, site_a, site_b)
        _stopped_after(site_a, reads, cancelled_at, "cancelled")
        asked = len(site_a.requests)
        requested = {site_a.base_url + r.path for r in _page_requests(site_a)}
        loop.run_until_idle()
        assert len(site_a.requests) == asked  # nothing of the cancelled crawl is fetched again
    rows = frontier_rows(store, "pa")
    held = set(shard.held)
    assert held
    assert not held & requested
    # Every row is cancelled (a final state): the batch landed after the cancel, so those it had
    # requested before it stay cancelled too, their pages landed.
    assert {u for u, (_d, s) in rows.items() if s == "cancelled"} == set(rows) == held | (requested & set(rows))
    outcomes = dict(store.query("SELECT url, outcome FROM batch_items WHERE crawl_id = 'pa'"))
    assert {outcomes[u] for u in held} == {"skipped"}


def test_a_url_that_an_active_crawl_also_wants_is_not_held(settings, bus, store):
    """The watch holds a URL only once every crawl that wants it is paused or cancelled, reading
    the lake at most once an interval."""
    loop = crawl_loop(settings, bus, store)
    frontier = loop.crawler.frontier
    frontier.register(crawl_request("wa", "http://127.0.0.1:9/"))
    frontier.register(crawl_request("wb", "http://127.0.0.1:9/"))
    now = [0.0]
    watch = ControlWatch(FrontierReadModel(store).crawl_states, {"wa", "wb"}, interval_s=1.0, clock=lambda: now[0])
    frontier.control(build_control("wa", "pause"))
    assert not watch.holds_url("http://127.0.0.1:9/a", ("wa",))  # not read yet: the plan step has just read
    now[0] = 1.0
    assert watch.holds_url("http://127.0.0.1:9/a", ("wa",))
    assert not watch.holds_url("http://127.0.0.1:9/b", ("wa", "wb"))  # wb is active and wants it
    frontier.control(build_control("wb", "cancel"))
    now[0] = 1.5
    assert not watch.holds_url("http://127.0.0.1:9/b", ("wa", "wb"))  # within the interval: the last read holds
    now[0] = 2.0
    assert watch.holds_url("http://127.0.0.1:9/b", ("wa", "wb"))
    assert watch.passed_over == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    # A render step's watch reads at its first question: a whole fetch step came after the plan's read.
    assert ControlWatch(FrontierReadModel(store).crawl_states, {"wa"}, clock=lambda: 0.0,
                        read_first=True).holds_url("http://127.0.0.1:9/c", ("wa",))
