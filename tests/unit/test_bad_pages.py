"""A crawl of a small site with bad pages beside ordinary ones (tests.sites.bad_pages), through the
engine's crawl loop: every page lands, fetched once, each bad one with what went wrong on its row,
and the crawl ends. The same crawl through Dagster is tests/e2e/test_bad_pages.py."""

from __future__ import annotations

import pytest

from crawl_platform.config import Settings
from tests.sites.bad_pages import assert_crawled, serve_bad_pages
from tests.sites.hostile import HostileSite
from tests.unit.crawl_rows import crawl_loop, crawl_request


@pytest.mark.timeout(300)
def test_bad_pages_never_stop_the_crawl_and_each_page_is_fetched_once(crawl_env: Settings, bus, store):
    with HostileSite(lifetime_s=300) as site:
        pages = serve_bad_pages(site)
        loop = crawl_loop(crawl_env, bus, store)
        loop.crawler.frontier.register(crawl_request("bad", site.url("/"), max_depth=3))
        batches = loop.run_until_idle(max_turns=50).batches
        assert_crawled(store, pages, site, "bad")
        assert sum(report.failed for report in batches) == 1  # the redirect to no URL
