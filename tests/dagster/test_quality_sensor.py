"""The quality sensor: landed batches are checked by Great Expectations in one run, off the batch runs."""

import time

import pytest
from dagster import (
    DagsterEvent,
    DagsterEventType,
    DagsterRunStatus,
    SensorResult,
    SkipReason,
    build_sensor_context,
    materialize,
)
from dagster._core.test_utils import create_run_for_test

from crawl_platform.bus.offsets import batch_key, plan_batches
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.quality import quality_sensor
from tests.dagster.conftest import RESOURCES

SENSOR_RESOURCES = {"crawl": CrawlSettingsResource()}


def _tick(instance, cursor=None):
    return quality_sensor(build_sensor_context(instance=instance, cursor=cursor, resources=SENSOR_RESOURCES))


def _ranges(bus, topic, after=None):
    return plan_batches(bus.watermarks(topic), after or {}, batch_size=1000, max_batches=100)


def test_landed_batches_are_checked_together_and_only_once(crawl_env, bus, store, site, instance):
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="q1", max_depth=1))
    seeds = _ranges(bus, crawl_env.seeds_topic)
    assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
        "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges]}}}}).success
    landed = []
    cursor: dict[int, int] = {}
    for _level in range(2):  # the seed, then the pages it links to
        plan = _ranges(bus, crawl_env.frontier_topic, cursor)
        cursor = plan.cursor
        for batch in plan.batches:
            key = batch_key(0, batch)
            instance.add_dynamic_partitions("frontier_batches", [key])
            assert materialize([crawl_batch, frontier], partition_key=key, instance=instance,
                               resources=RESOURCES).success
            landed.append(key)
    assert len(landed) >= 2

    tick = _tick(instance)
    assert isinstance(tick, SensorResult)
    (request,) = tick.run_requests
    batches = request.run_config["ops"]["pages_pages_quality"]["config"]["batches"]
    assert batches == sorted(landed)

    job = defs.resolve_job_def("crawl_quality_job")
    result = job.execute_in_process(run_config=request.run_config, instance=instance, resources=RESOURCES)
    assert result.success
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {"pages_quality", "documents_quality"}
    assert all(e.passed for e in evaluations.values())
    pages_rows = store.query("SELECT count(*) FROM pages")[0][0]
    assert evaluations["pages_quality"].metadata["row_count"].value == pages_rows
    assert evaluations["pages_quality"].metadata["batch_id"].value == ", ".join(sorted(landed))

    # Nothing landed since: the next tick asks for nothing.
    again = _tick(instance, tick.cursor)
    assert not getattr(again, "run_requests", None)


def _land_the_seed(crawl_env, bus, site, instance, crawl_id):
    """Registers a one-page crawl and lands its seed's batch; returns the batch's key."""
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id=crawl_id, max_depth=0))
    seeds = _ranges(bus, crawl_env.seeds_topic)
    assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
        "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges]}}}}).success
    key = batch_key(0, _ranges(bus, crawl_env.frontier_topic).batches[0])
    instance.add_dynamic_partitions("frontier_batches", [key])
    assert materialize([crawl_batch, frontier], partition_key=key, instance=instance, resources=RESOURCES).success
    return key


@pytest.mark.parametrize("batch_job", ["crawl_batch_job", "crawl_batch_celery_job"])
def test_checks_wait_while_a_batch_run_is_going_then_start_when_it_ends(crawl_env, bus, site, instance, batch_job):
    key = _land_the_seed(crawl_env, bus, site, instance, "q3")
    run = create_run_for_test(instance, job_name=batch_job, status=DagsterRunStatus.STARTED)
    held = _tick(instance)
    assert isinstance(held, SkipReason)
    assert "batch runs are going" in held.skip_message
    assert "CRAWL_QUALITY_MAX_WAIT_S" in held.skip_message
    instance.report_dagster_event(DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name=run.job_name),
                                  run_id=run.run_id)
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.SUCCESS
    (request,) = _tick(instance).run_requests
    assert request.run_config["ops"]["pages_pages_quality"]["config"]["batches"] == [key]


def test_checks_wait_no_longer_than_the_max_wait_beside_batch_runs(crawl_env, bus, site, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_QUALITY_MAX_WAIT_S", "2")
    key = _land_the_seed(crawl_env, bus, site, instance, "q4")
    create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED)
    assert isinstance(_tick(instance), SkipReason)
    time.sleep(2.1)  # the batch landed more than 2 s ago now, and the batch run still goes
    (request,) = _tick(instance).run_requests
    assert request.run_config["ops"]["pages_pages_quality"]["config"]["batches"] == [key]


def test_a_bad_row_fails_the_check_of_its_batch(crawl_env, bus, store, site, instance):
    key = _land_the_seed(crawl_env, bus, site, instance, "q2")
    with store.write() as con:
        con.execute("UPDATE pages SET content_hash = 'not-a-hash' WHERE batch_id = ?", [key])
    (request,) = _tick(instance).run_requests
    job = defs.resolve_job_def("crawl_quality_job")
    result = job.execute_in_process(run_config=request.run_config, instance=instance, resources=RESOURCES)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["pages_quality"].passed
    assert evaluations["documents_quality"].passed
