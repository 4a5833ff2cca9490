"""Recurring passes (crawl_platform.pipeline.recrawl): a pass keeps every option of its crawl."""

from __future__ import annotations

import datetime

from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.recrawl import plan_recrawls
from crawl_platform.pipeline.submission import build_crawl_request


def test_a_recrawl_keeps_every_option_of_its_crawl(store, bus):
    Frontier(store, bus).register(build_crawl_request(
        ["http://127.0.0.1:9/shop/"], crawl_id="shop", max_pages=50, max_depth=3, scope="domain",
        allow=[r"/shop/"], deny=[r"/shop/cart", r"\?sort="], max_pages_per_host=7,
        user_agent="shop-bot/2", use_sitemaps=True))
    [plan] = plan_recrawls(store, datetime.date(2026, 11, 30))
    assert plan.crawl_id == "shop@20261130"
    assert plan.seeds == ("http://127.0.0.1:9/shop/",)
    assert (plan.max_pages, plan.max_depth, plan.scope) == (50, 3, "domain")
    assert plan.deny_patterns == (r"/shop/cart", r"\?sort=")
    assert plan.max_pages_per_host == 7
    assert plan.allow_patterns == (r"/shop/",)
    assert plan.user_agent == "shop-bot/2"
    assert plan.use_sitemaps is True
