"""Recurring passes (crawl_platform.pipeline.recrawl, .schedules): a pass keeps every option of its
crawl, and a scheduled family is due at its next tick, never while a pass runs."""

from __future__ import annotations

import dataclasses
import datetime

from crawl_platform.extract.rules import parse_rules
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.schedules import set_schedule
from crawl_platform.pipeline.recrawl import plan_recrawls
from crawl_platform.pipeline.schedules import plan_due_passes
from crawl_platform.pipeline.submission import build_crawl_request


def test_a_recrawl_keeps_every_option_of_its_crawl(store, bus):
    Frontier(store, bus).register(build_crawl_request(
        ["http://127.0.0.1:9/shop/"], crawl_id="shop", max_pages=50, max_depth=3, scope="domain",
        allow=[r"/shop/"], deny=[r"/shop/cart", r"\?sort="], max_pages_per_host=7,
        user_agent="shop-bot/2", use_sitemaps=True, host_delay_ms=1500, host_concurrency=2, priority=3,
        extract=parse_rules("fields: {title: 'css:h1'}", "rules")))
    [plan] = plan_recrawls(store, datetime.date(2026, 11, 30))
    assert plan.crawl_id == "shop@20261130"
    assert plan.seeds == ("http://127.0.0.1:9/shop/",)
    assert (plan.max_pages, plan.max_depth, plan.scope) == (50, 3, "domain")
    assert plan.deny_patterns == (r"/shop/cart", r"\?sort=")
    assert plan.max_pages_per_host == 7
    assert plan.allow_patterns == (r"/shop/",)
    assert plan.user_agent == "shop-bot/2"
    assert plan.use_sitemaps is True
    assert (plan.host_delay_ms, plan.host_concurrency, plan.priority) == (1500, 2, 3)
    assert parse_rules(plan.extract_rules, "rules").fields.keys() == {"title"}


def _at(request, when: datetime.datetime):
    return dataclasses.replace(request, submitted_at=when.replace(tzinfo=datetime.UTC).timestamp())


def test_a_family_is_due_at_its_next_tick_after_its_latest_pass_and_never_while_one_runs(store, bus):
    frontier = Frontier(store, bus)
    t0 = datetime.datetime(2026, 11, 30, 10, 17)
    frontier.register(_at(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="cron", cron="0 */6 * * *"), t0))
    frontier.register(_at(build_crawl_request(["http://127.0.0.1:8/"], crawl_id="off", every="1h"), t0))
    set_schedule(store, "off", None)
    with store.write() as con:
        con.execute("UPDATE frontier SET state = 'fetched'")
    assert plan_due_passes(store, datetime.datetime(2026, 11, 30, 11, 59)).passes == []
    noon = datetime.datetime(2026, 11, 30, 12, 0)
    [due] = plan_due_passes(store, noon).passes  # the cron's next tick after 10:17; "off" is off
    assert (due.crawl_id, due.submitted_at) == ("cron@20261130T1200", noon.replace(tzinfo=datetime.UTC).timestamp())
    frontier.register(due)  # its seed is queued again, so the pass is running
    [state] = plan_due_passes(store, datetime.datetime(2026, 11, 30, 18, 5)).families
    assert (state.latest_pass, state.running) == ("cron@20261130T1200", True)
    assert plan_due_passes(store, datetime.datetime(2026, 11, 30, 18, 5)).passes == []
