"""The recurring_crawls sensor and the recurring_crawls_on_schedule check, against a real lake:
one sensor for every scheduled crawl, passes with every option, a late crawl failing the check."""

from __future__ import annotations

import dataclasses
import datetime

from dagster import AssetCheckSeverity, build_sensor_context

from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.schedules import parse_schedule, set_schedule
from crawl_platform.pipeline.schedules import plan_due_passes
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform_dagster.assets.intake import submit_crawl_job
from crawl_platform_dagster.assets.recurring import freshness
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.store import CrawlStoreResource
from crawl_platform_dagster.sensors.recurring import recurring_crawls
from tests.unit.test_cli import _seed_messages


def _ago(**delta: float) -> float:
    return (datetime.datetime.now(datetime.UTC) - datetime.timedelta(**delta)).timestamp()


def _register(frontier: Frontier, crawl_id: str, hours_ago: float, **options) -> None:
    request = build_crawl_request(["http://127.0.0.1:9/"], crawl_id=crawl_id, **options)
    frontier.register(dataclasses.replace(request, submitted_at=_ago(hours=hours_ago)))


def test_the_sensor_submits_each_due_crawl_once_with_its_options_and_reports_freshness(crawl_env, store, bus):
    frontier = Frontier(store, bus)
    _register(frontier, "hourly", 2, every="1h", deny=[r"/cart"], max_pages_per_host=4, user_agent="h/1")
    _register(frontier, "leap", 2, cron="0 0 29 2 *")  # not due until a 29 February
    _register(frontier, "plain", 30)  # no schedule: never resubmitted by this sensor
    with store.write() as con:  # every first pass has fetched its seed
        con.execute("UPDATE frontier SET state = 'fetched'")
    context = build_sensor_context(resources={"crawl_store": CrawlStoreResource()})
    result = recurring_crawls(context)
    [run] = result.run_requests
    assert run.run_key.startswith("hourly@")
    config = run.run_config["ops"]["submit_crawl_request"]["config"]
    assert (config["deny"], config["max_pages_per_host"], config["user_agent"]) == (["/cart"], 4, "h/1")
    assert run.tags["crawl/family"] == "hourly"
    [evaluation] = result.asset_events
    assert evaluation.check_name == "recurring_crawls_on_schedule"
    assert evaluation.passed
    rows = {r.data["crawl"]: r.data for r in evaluation.metadata["crawls"].value.records}
    assert set(rows) == {"hourly", "leap"}
    assert rows["leap"]["schedule"] == "cron '0 0 29 2 *'"
    assert rows["hourly"]["state"] == "on schedule"

    # The pass runs: submit_crawl_job puts it on the seeds topic with every option.
    assert submit_crawl_job.execute_in_process(run_config=run.run_config,
                                               resources={"crawl": CrawlSettingsResource()}).success
    [request] = [r for r in _seed_messages(bus) if r.crawl_id == run.run_key]
    assert (request.deny_patterns, request.max_pages_per_host, request.user_agent) == (("/cart",), 4, "h/1")


def test_a_crawl_whose_last_pass_is_older_than_one_and_a_half_periods_fails_the_check(crawl_env, store, bus):
    frontier = Frontier(store, bus)
    _register(frontier, "hourly", 0.1, every="1h")
    set_schedule(store, "hourly", parse_schedule("1h"))
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert freshness(plan_due_passes(store, now), now).passed
    # Its seed is still pending; three hours on, no pass completed within 1.5 hours.
    later = now + datetime.timedelta(hours=3)
    result = freshness(plan_due_passes(store, later), later)
    assert not result.passed
    assert result.severity == AssetCheckSeverity.WARN
    assert result.description == "behind schedule: hourly"
    assert plan_due_passes(store, later).passes == []  # a pass still running is not overlapped


def test_a_tick_with_nothing_due_skips_but_still_reports_freshness(crawl_env, store, bus):
    frontier = Frontier(store, bus)
    _register(frontier, "hourly", 0.2, every="1h")
    context = build_sensor_context(resources={"crawl_store": CrawlStoreResource()})
    result = recurring_crawls(context)
    assert result.run_requests == []
    assert result.skip_reason.skip_message == "no recurring crawl is due"
    tick = recurring_crawls.evaluate_tick(build_sensor_context(resources={"crawl_store": CrawlStoreResource()}))
    assert tick.skip_message == "no recurring crawl is due"
    assert [e.check_name for e in tick.asset_events] == ["recurring_crawls_on_schedule"]
    [evaluation] = result.asset_events
    assert evaluation.passed
    assert evaluation.metadata["late_crawls"].value == "-"


def test_no_recurring_crawl_is_one_skip_reason(crawl_env):
    result = recurring_crawls(build_sensor_context(resources={"crawl_store": CrawlStoreResource()}))
    assert result.skip_reason.skip_message == "no recurring crawls"
