"""The alert sensors, through Dagster's test APIs, send real alerts to a loopback webhook and SMTP
server: a failed batch run names its crawl, a failed quality check and an erroring one name
theirs, and a stalled crawl alerts once per stall."""

import time

from dagster import (
    DagsterEventType,
    DagsterRunStatus,
    SensorResult,
    build_run_status_sensor_context,
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
from crawl_platform_dagster.sensors.alerts import quality_alert_sensor, run_failure_alert_sensor, stall_alert_sensor
from crawl_platform_dagster.sensors.quality import quality_sensor
from tests.conftest import alert_settings, export_settings
from tests.dagster.conftest import RESOURCES

UI = "http://ui.test:3000"
SENSOR_RESOURCES = {"crawl": CrawlSettingsResource()}


def _ranges(bus, topic, after=None):
    return plan_batches(bus.watermarks(topic), after or {}, batch_size=1000, max_batches=100)


def _submit_and_register(bus, crawl_env, instance, site, crawl_id, max_depth=0):
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id=crawl_id, max_depth=max_depth))
    seeds = _ranges(bus, crawl_env.seeds_topic)
    assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
        "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges]}}}}).success


def _first_batch(bus, crawl_env, instance):
    key = batch_key(0, _ranges(bus, crawl_env.frontier_topic).batches[0])
    instance.add_dynamic_partitions("frontier_batches", [key])
    return key


def _failure_context(instance, run):
    records = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.RUN_FAILURE).records
    return build_run_status_sensor_context(
        sensor_name="run_failure_alert_sensor", dagster_event=records[-1].event_log_entry.dagster_event,
        dagster_instance=instance, dagster_run=instance.get_run_by_id(run.run_id),
        resources=SENSOR_RESOURCES).for_run_failure()


def test_a_batch_run_that_died_alerts_with_its_crawl_batch_and_run_link(
        crawl_env, bus, site, instance, webhook, smtp_server, monkeypatch):
    export_settings(alert_settings(crawl_env, webhook, smtp_server), monkeypatch)
    _submit_and_register(bus, crawl_env, instance, site, "shop-1")
    key = _first_batch(bus, crawl_env, instance)
    # What run monitoring does when a batch run's worker was killed: the run fails, no step did.
    run = create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED,
                              tags={"dagster/partition": key})
    instance.report_run_failed(run, message="Run worker process died (exit code -9)")

    run_failure_alert_sensor(_failure_context(instance, run))

    expected = "\n".join([
        "[crawl-platform] Run failed: crawl_batch_job (crawl shop-1)",
        "Crawl: shop-1",
        "What broke: Run worker process died (exit code -9)",
        f"Batch: {key}",
        f"Run: {UI}/runs/{run.run_id}",
    ])
    assert webhook.texts() == [expected]
    (mail,) = smtp_server.mails
    assert mail.message["Subject"] == "[crawl-platform] Run failed: crawl_batch_job (crawl shop-1)"
    assert mail.recipients == ["ops@test.local", "oncall@test.local"]


def test_a_quality_run_that_errors_alerts_its_checks_with_their_links(
        crawl_env, bus, site, instance, webhook, monkeypatch):
    export_settings(alert_settings(crawl_env, webhook), monkeypatch)
    _submit_and_register(bus, crawl_env, instance, site, "shop-2")
    key = _first_batch(bus, crawl_env, instance)
    assert materialize([crawl_batch, frontier], partition_key=key, instance=instance, resources=RESOURCES).success
    (request,) = quality_sensor(build_sensor_context(instance=instance, resources=SENSOR_RESOURCES)).run_requests
    # The lake's catalog becomes unreachable before the checks read it.
    monkeypatch.setenv("CRAWL_LAKE_CATALOG", "postgres:dbname=no_such_catalog host=127.0.0.1 user=postgres")
    result = defs.resolve_job_def("crawl_quality_job").execute_in_process(
        run_config=request.run_config, instance=instance, resources=RESOURCES, raise_on_error=False)
    assert not result.success

    run_failure_alert_sensor(_failure_context(instance, result.dagster_run))

    (text,) = webhook.texts()
    lines = text.splitlines()
    assert lines[0] == "[crawl-platform] Quality check errored: documents_quality, pages_quality (crawl shop-2)"
    assert lines[1] == "Crawl: shop-2"  # read back from the batch's Kafka messages, the lake being out of reach
    assert lines[2].startswith("What broke: steps documents_documents_quality, pages_pages_quality: "
                               "StoreUnavailableError: cannot open the lake postgres:dbname=no_such_catalog ")
    assert 'database "no_such_catalog" does not exist' in lines[2]
    assert lines[3] == f"Batches: {key}"
    assert lines[4:] == [
        f"Check documents_quality: {UI}/assets/documents?view=checks&checkDetail=documents_quality",
        f"Check pages_quality: {UI}/assets/pages?view=checks&checkDetail=pages_quality",
        f"Run: {UI}/runs/{result.dagster_run.run_id}",
    ]


def _sensor_tick(sensor, instance, cursor=None):
    return sensor(build_sensor_context(instance=instance, cursor=cursor, resources=SENSOR_RESOURCES))


def test_a_failed_quality_check_alerts_once(crawl_env, bus, site, instance, store, webhook, monkeypatch):
    export_settings(alert_settings(crawl_env, webhook), monkeypatch)
    first = _sensor_tick(quality_alert_sensor, instance)
    assert isinstance(first, SensorResult)
    assert first.cursor == "0"  # the first tick starts watching; it alerts no old history
    _submit_and_register(bus, crawl_env, instance, site, "shop-3")
    key = _first_batch(bus, crawl_env, instance)
    assert materialize([crawl_batch, frontier], partition_key=key, instance=instance, resources=RESOURCES).success
    with store.write() as con:
        con.execute("UPDATE pages SET content_hash = 'not-a-hash' WHERE batch_id = ?", [key])
    (request,) = quality_sensor(build_sensor_context(instance=instance, resources=SENSOR_RESOURCES)).run_requests
    result = defs.resolve_job_def("crawl_quality_job").execute_in_process(
        run_config=request.run_config, instance=instance, resources=RESOURCES)

    tick = _sensor_tick(quality_alert_sensor, instance, first.cursor)
    (text,) = webhook.texts()
    lines = text.splitlines()
    assert lines[0] == "[crawl-platform] Quality check failed: pages_quality (crawl shop-3)"
    assert lines[1] == "Crawl: shop-3"
    assert lines[2].startswith("What broke: pages_quality on pages: ")
    assert "content_hash" in lines[2]
    assert lines[3:] == [f"Batches: {key}",
                         f"Check pages_quality: {UI}/assets/pages?view=checks&checkDetail=pages_quality",
                         f"Run: {UI}/runs/{result.dagster_run.run_id}"]
    again = _sensor_tick(quality_alert_sensor, instance, tick.cursor)
    assert not getattr(again, "run_requests", None)
    assert len(webhook.posts) == 1


def test_a_stalled_crawl_alerts_once_per_stall(crawl_env, bus, site, instance, webhook, monkeypatch):
    export_settings(alert_settings(crawl_env, webhook, stall_minutes=0.002), monkeypatch)  # 0.12 s
    _submit_and_register(bus, crawl_env, instance, site, "shop-4", max_depth=1)
    time.sleep(0.2)  # the seed waits, and no batch runs
    cursor = None
    for _ in range(3):  # a tick a minute in production; every tick sees the same stall
        tick = _sensor_tick(stall_alert_sensor, instance, cursor)
        cursor = tick.cursor
    assert [t.splitlines()[0] for t in webhook.texts()] == ["[crawl-platform] Crawl stalled: shop-4"]
    assert webhook.texts()[0].splitlines()[2].startswith("What broke: 1 URLs pending and none finished for ")

    # A batch lands (the seed is fetched, its links are pending): progress, then a new stall.
    key = _first_batch(bus, crawl_env, instance)
    assert materialize([crawl_batch, frontier], partition_key=key, instance=instance, resources=RESOURCES).success
    time.sleep(0.2)
    for _ in range(3):
        cursor = _sensor_tick(stall_alert_sensor, instance, cursor).cursor
    assert len(webhook.posts) == 2
    assert webhook.texts()[1].splitlines()[0] == "[crawl-platform] Crawl stalled: shop-4"
    assert "URLs pending" in webhook.texts()[1]


def test_a_failed_run_alert_no_channel_took_is_sent_again_once_the_webhook_is_back(
        crawl_env, bus, site, instance, webhook, monkeypatch):
    export_settings(alert_settings(crawl_env, webhook), monkeypatch)
    _submit_and_register(bus, crawl_env, instance, site, "shop-5")
    key = _first_batch(bus, crawl_env, instance)
    run = create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED,
                              tags={"dagster/partition": key})
    instance.report_run_failed(run, message="Run worker process died (exit code -9)")
    webhook.status = 503  # the chat service is down when the run fails
    run_failure_alert_sensor(_failure_context(instance, run))
    assert len(webhook.posts) == 1

    cursor = _sensor_tick(stall_alert_sensor, instance).cursor  # still down: kept
    assert len(webhook.posts) == 2
    webhook.status = 200
    cursor = _sensor_tick(stall_alert_sensor, instance, cursor).cursor
    assert len(webhook.posts) == 3
    assert webhook.texts()[2].splitlines()[:2] == ["[crawl-platform] Run failed: crawl_batch_job (crawl shop-5)",
                                                   "Crawl: shop-5"]
    assert webhook.texts()[2] == webhook.texts()[0]
    _sensor_tick(stall_alert_sensor, instance, cursor)
    assert len(webhook.posts) == 3  # sent once, then gone from the outbox
