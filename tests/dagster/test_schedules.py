"""The recurring-crawl schedule, evaluated against a real DuckDB store."""

import dataclasses
import datetime

from dagster import build_schedule_context

from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform_dagster.resources.store import CrawlStoreResource
from crawl_platform_dagster.sensors.schedules import recrawl_daily


def test_recrawl_schedule_submits_each_crawl_family_once_per_day(crawl_env, store, bus):
    frontier = Frontier(store, bus)
    shop = build_crawl_request(["http://127.0.0.1:9/"], crawl_id="shop", max_pages=50, max_depth=3,
                               deny=[r"/cart"], max_pages_per_host=5, user_agent="shop-bot/1",
                               allow=[r"^http://127\.0\.0\.1:9/"], use_sitemaps=True)
    frontier.register(shop)
    frontier.register(build_crawl_request(["http://127.0.0.1:8/a"], crawl_id="blog", scope="domain"))
    frontier.register(build_crawl_request(["http://127.0.0.1:8/a"], crawl_id="blog@20261128", scope="domain"))
    when = datetime.datetime(2026, 11, 30, 3, 0, tzinfo=datetime.UTC)
    context = build_schedule_context(scheduled_execution_time=when, resources={"crawl_store": CrawlStoreResource()})
    requests = recrawl_daily(context)
    configs = {r.run_key: r.run_config["ops"]["submit_crawl_request"]["config"] for r in requests}
    assert set(configs) == {"shop@20261130", "blog@20261130"}
    assert configs["shop@20261130"] == {"seeds": ["http://127.0.0.1:9/"], "crawl_id": "shop@20261130",
                                        "max_pages": 50, "max_depth": 3, "scope": "host",
                                        "allow": [r"^http://127\.0\.0\.1:9/"], "deny": [r"/cart"],
                                        "max_pages_per_host": 5, "user_agent": "shop-bot/1", "use_sitemaps": True,
                                        "host_delay_ms": 0, "host_concurrency": 0, "priority": 0,
                                        "extract_rules": "", "render": "never", "screenshots": False}
    assert configs["blog@20261130"]["scope"] == "domain"

    frontier.register(dataclasses.replace(shop, crawl_id="shop@20261130"))  # today's pass, as submitted
    again = recrawl_daily(build_schedule_context(scheduled_execution_time=when,
                                                 resources={"crawl_store": CrawlStoreResource()}))
    assert {r.run_key for r in again} == {"blog@20261130"}


def test_recrawl_schedule_skips_when_nothing_was_crawled(crawl_env):
    when = datetime.datetime(2026, 11, 30, 3, 0, tzinfo=datetime.UTC)
    context = build_schedule_context(scheduled_execution_time=when, resources={"crawl_store": CrawlStoreResource()})
    assert recrawl_daily(context).skip_message == "no crawls registered yet"
