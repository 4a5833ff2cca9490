"""Sensors against a real broker: batches cut from watermarks, cursors, run keys, backpressure."""

import base64
import json
import time

from dagster import DagsterInstance, DagsterRunStatus, SensorResult, build_sensor_context, validate_run_config
from dagster._core.test_utils import create_run_for_test

from crawl_platform.bus.messages import FrontierURL, decode_dead_letter, encode
from crawl_platform.bus.offsets import (
    OffsetRange,
    batch_key,
    cursor_number,
    decode_cursor,
    parse_batch_key,
    with_cursor_number,
)
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.coordinator import IDLE_SWEEP_EVERY_S
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.kafka import frontier_sensor, seeds_sensor
from tests.conftest import all_records
from tests.unit.crawl_rows import crawl_request, land


def _tick(sensor, instance, cursor=None) -> SensorResult:
    context = build_sensor_context(instance=instance, cursor=cursor, resources={"crawl": CrawlSettingsResource()})
    result = sensor(context)
    assert isinstance(result, SensorResult)
    return result


def test_frontier_sensor_cuts_batches_and_keeps_offsets(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_RUN_CONTINUE_S", "0")  # runs that do not go on: every batch is cut at once
    host_urls = [FrontierURL("c1", f"http://127.0.0.1:9/p{i}", 1) for i in range(120)]
    assert all(publish_frontier(bus, host_urls))
    first = _tick(frontier_sensor, instance)
    partition = next(p for p, (_lo, hi) in bus.watermarks(crawl_env.frontier_topic).items() if hi)
    expected = [OffsetRange(partition, 0, 50), OffsetRange(partition, 50, 100), OffsetRange(partition, 100, 120)]
    assert [r.partition_key for r in first.run_requests] == [batch_key(0, r) for r in expected]
    assert [r.run_key for r in first.run_requests] == [r.partition_key for r in first.run_requests]
    plan_config = [r.run_config["ops"]["crawl_batch"]["ops"]["plan_batch"]["config"] for r in first.run_requests]
    assert all(c == {"refetch_done": False, "shards": 1} for c in plan_config)
    assert all(r.tags[f"crawl/frontier_p{partition}"] == OffsetRange.parse(r.partition_key[3:]).key
               for r in first.run_requests)
    assert first.dynamic_partitions_requests[0].partition_keys == [r.partition_key for r in first.run_requests]
    offsets, epoch = decode_cursor(first.cursor)
    assert offsets[partition] == 120
    assert epoch == 0

    quiet = _tick(frontier_sensor, instance, first.cursor)
    assert not quiet.run_requests
    assert quiet.skip_reason

    assert all(publish_frontier(bus, host_urls[:5]))
    more = _tick(frontier_sensor, instance, first.cursor)
    assert [r.partition_key for r in more.run_requests] == [batch_key(0, OffsetRange(partition, 120, 125))]


def test_frontier_sensor_detects_a_broker_that_lost_its_log(crawl_env, bus, instance):
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    # A cursor far beyond the high watermark is what a restarted, memory-only broker looks like.
    lost_cursor = json.dumps({"epoch": 0, "offsets": {str(p): 1000 for p in range(crawl_env.topic_partitions)}})
    result = _tick(frontier_sensor, instance, lost_cursor)
    requeue = [r for r in result.run_requests if r.job_name == "crawl_intake_job"]
    assert len(requeue) == 1
    assert requeue[0].run_config["ops"]["crawls"]["config"]["requeue_pending"] is True
    batches = [r for r in result.run_requests if r.job_name == "crawl_batch_job"]
    assert [r.partition_key.split(".")[0] for r in batches] == ["e1"]
    assert decode_cursor(result.cursor)[1] == 1


def test_frontier_sensor_holds_back_while_the_run_queue_is_full(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_MAX_QUEUED_RUNS", "1")

    create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.NOT_STARTED)
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    result = _tick(frontier_sensor, instance)
    assert not result.run_requests
    assert "queue full" in result.skip_reason.skip_message


def test_seeds_sensor_registers_crawls_itself_and_reports_the_crawls_asset(crawl_env, bus, store, instance):
    crawl_ids = []
    for seed in ("http://127.0.0.1:9/", "http://127.0.0.1:8/"):
        request = build_crawl_request([seed])
        crawl_ids.append(request.crawl_id)
        submit_crawl(bus, request)
    result = _tick(seeds_sensor, instance)
    assert not result.run_requests  # no intake run: registered in the sensor's evaluation
    assert {row[0] for row in store.query("SELECT crawl_id FROM crawls")} == set(crawl_ids)
    published = sorted(rec.value for rec in all_records(bus, crawl_env.frontier_topic))
    assert len(published) == 2  # both seeds are on the frontier for the frontier sensor's next pass
    (event,) = result.asset_events
    assert event.asset_key.to_user_string() == "crawls"
    assert event.metadata["crawls_registered"].value == 2
    assert event.metadata["seeds_admitted"].value == 2
    assert set(event.metadata["crawl_ids"].value.split(", ")) == set(crawl_ids)
    again = _tick(seeds_sensor, instance, result.cursor)
    assert not again.run_requests
    assert not again.asset_events


def test_a_crawl_that_reads_sitemaps_goes_to_an_intake_run(crawl_env, bus, store, instance):
    plain = build_crawl_request(["http://127.0.0.1:9/"], crawl_id="plain")
    mapped = build_crawl_request(["http://127.0.0.1:8/"], crawl_id="mapped", use_sitemaps=True)
    for request in (plain, mapped):
        submit_crawl(bus, request)
    result = _tick(seeds_sensor, instance)
    (run,) = result.run_requests
    left = [OffsetRange.parse(k) for k in run.run_config["ops"]["crawls"]["config"]["seed_ranges"]]
    intake = SeedIntake(bus, store)
    assert any(intake.run_needed(r) for r in left)  # the sitemaps crawl is among them
    registered = {row[0] for row in store.query("SELECT crawl_id FROM crawls")}
    assert "mapped" not in registered  # left for the run, which fetches its sitemaps
    assert validate_run_config(defs.resolve_job_def("crawl_intake_job"), run.run_config)
    for offsets in left:
        intake.register(offsets)
    assert {row[0] for row in store.query("SELECT crawl_id FROM crawls")} == {"plain", "mapped"}


def test_frontier_sensor_run_config_is_valid_for_the_batch_job(crawl_env, bus, instance):
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    (request,) = _tick(frontier_sensor, instance).run_requests
    job = defs.resolve_job_def("crawl_batch_job")
    assert validate_run_config(job, request.run_config)


def test_a_batch_spans_the_partitions_of_one_group_and_is_tagged_per_partition(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_BATCH_GROUPS", "2")
    urls = [FrontierURL("c1", f"http://h{h}.test:9/p{i}", 1) for h in range(24) for i in range(3)]
    assert all(publish_frontier(bus, urls))
    watermarks = bus.watermarks(crawl_env.frontier_topic)
    busy = sorted(p for p, (_lo, hi) in watermarks.items() if hi)
    assert len(busy) == crawl_env.topic_partitions  # 24 hosts fill every one of the 4 partitions
    result = _tick(frontier_sensor, instance)
    assert len(result.run_requests) == 2
    for group, request in enumerate(result.run_requests):
        _epoch, ranges = parse_batch_key(request.partition_key)
        assert [r.partition for r in ranges] == [p for p in busy if p % 2 == group]
        assert {r.end - r.start for r in ranges} == {watermarks[r.partition][1] for r in ranges}
        partition_tags = {k for k in request.tags if k.startswith("crawl/frontier_p")}
        assert partition_tags == {f"crawl/frontier_p{r.partition}" for r in ranges}
        assert request.tags["crawl/partitions"] == ",".join(str(r.partition) for r in ranges)


def test_celery_executor_fans_each_batch_out_into_four_shards(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_EXECUTOR", "celery")
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    (request,) = _tick(frontier_sensor, instance).run_requests
    assert request.job_name == "crawl_batch_celery_job"
    assert request.run_config["ops"]["crawl_batch"]["ops"]["plan_batch"]["config"]["shards"] == 4


def test_a_celery_batch_run_names_the_broker_variables_and_its_config_holds_no_password(crawl_env, bus, instance,
                                                                                       monkeypatch):
    broker, backend = "pyamqp://crawler:Br0ker-pw@rabbit.internal:5672//", "redis://:R3sult-pw@redis.internal:6379/1"
    monkeypatch.setenv("CRAWL_EXECUTOR", "celery")
    monkeypatch.setenv("CRAWL_CELERY_BROKER", broker)
    monkeypatch.setenv("CRAWL_CELERY_BACKEND", backend)
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    (request,) = _tick(frontier_sensor, instance).run_requests

    executor = request.run_config["execution"]["config"]
    assert executor["broker"] == {"env": "CRAWL_CELERY_BROKER"}
    assert executor["backend"] == {"env": "CRAWL_CELERY_BACKEND"}
    shown = json.dumps([request.run_config, request.tags])  # what the UI shows of the run
    assert "Br0ker-pw" not in shown
    assert "R3sult-pw" not in shown
    # Where the run executes, Dagster reads the URLs from the environment, as the workers do.
    resolved = validate_run_config(defs.resolve_job_def("crawl_batch_celery_job"), request.run_config)
    assert (resolved["execution"]["celery"]["broker"], resolved["execution"]["celery"]["backend"]) == (broker, backend)


def test_celery_executor_defaults_need_no_variable(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_EXECUTOR", "celery")
    for name in ("CRAWL_CELERY_BROKER", "CRAWL_CELERY_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    (request,) = _tick(frontier_sensor, instance).run_requests
    resolved = validate_run_config(defs.resolve_job_def("crawl_batch_celery_job"), request.run_config)
    assert resolved["execution"]["celery"]["broker"] == "pyamqp://guest:guest@127.0.0.1:5672//"  # RabbitMQ's own
    assert resolved["execution"]["celery"]["backend"] == "rpc://"


def test_frontier_sensor_notices_a_recreated_topic_even_if_new_messages_refilled_the_offsets(crawl_env, bus, instance):
    assert all(publish_frontier(bus, [FrontierURL("c1", f"http://127.0.0.1:9/p{i}", 1) for i in range(3)]))
    first = _tick(frontier_sensor, instance)
    assert json.loads(first.cursor)["topic_id"] == bus.topic_id(crawl_env.frontier_topic)
    # The same offsets, but the cursor was written for another incarnation of the topic (a broker
    # that restarted empty and whose log new publishes already filled past the old cursor).
    stale = json.loads(first.cursor) | {"topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}
    for part in stale["offsets"]:
        stale["offsets"][part] = 0
    result = _tick(frontier_sensor, instance, json.dumps(stale))
    assert [r.job_name for r in result.run_requests if r.job_name == "crawl_intake_job"] == ["crawl_intake_job"]
    batches = [r for r in result.run_requests if r.job_name == "crawl_batch_job"]
    assert {r.partition_key.split(".")[0] for r in batches} == {"e1"}
    assert json.loads(result.cursor)["topic_id"] == bus.topic_id(crawl_env.frontier_topic)
    assert decode_cursor(result.cursor)[1] == 1


def test_queued_urls_that_no_run_will_fetch_are_published_again(crawl_env, bus, store, instance):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="orphan"))
    first = _tick(frontier_sensor, instance)  # plans the seed's message
    assert [r.job_name for r in first.run_requests] == ["crawl_batch_job"]
    # Its run failed for good (or the message vanished): the URL stays queued, and ages.
    with store.write() as con:
        con.execute("UPDATE frontier SET updated_at = updated_at - INTERVAL 5 MINUTE")
    create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED)
    busy = _tick(frontier_sensor, instance, first.cursor)
    assert not busy.run_requests  # a batch run is still going: it may yet fetch them

    with DagsterInstance.ephemeral() as idle_instance:
        result = _tick(frontier_sensor, idle_instance, first.cursor)
    (requeue,) = result.run_requests
    assert requeue.job_name == "crawl_intake_job"
    assert requeue.run_config["ops"]["crawls"]["config"]["requeue_pending"] is True


def test_an_idle_frontier_sensor_looks_for_orphans_once_a_sweep_interval(crawl_env, bus, store, instance):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="swept"))
    planned = _tick(frontier_sensor, instance)  # plans the seed's message; its run never comes
    with store.write() as con:
        con.execute("UPDATE frontier SET updated_at = updated_at - INTERVAL 5 MINUTE")
    with DagsterInstance.ephemeral() as idle_instance:
        looked = _tick(frontier_sensor, idle_instance, planned.cursor)
        assert [r.job_name for r in looked.run_requests] == ["crawl_intake_job"]
        # The next idle ticks, within IDLE_SWEEP_EVERY_S, leave the lake alone: the orphan stays unseen.
        assert not _tick(frontier_sensor, idle_instance, looked.cursor).run_requests
        assert decode_cursor(looked.cursor) == decode_cursor(planned.cursor)  # the offsets are untouched
        swept_at = cursor_number(looked.cursor, "swept_at")
        assert swept_at is not None
        assert time.time() - swept_at < IDLE_SWEEP_EVERY_S
        later = with_cursor_number(looked.cursor, "swept_at", swept_at - IDLE_SWEEP_EVERY_S)
        assert [r.job_name for r in _tick(frontier_sensor, idle_instance, later).run_requests] == ["crawl_intake_job"]


def test_a_requeue_restarts_the_clock_of_queued_urls(crawl_env, bus, store):
    frontier = Frontier(store, bus)
    frontier.register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="clock"))
    with store.write() as con:
        con.execute("UPDATE frontier SET updated_at = updated_at - INTERVAL 5 MINUTE")
    assert frontier.orphaned_count(60) == 1
    assert frontier.requeue_all_pending().published == 1
    assert frontier.orphaned_count(60) == 0


def test_a_burst_from_a_batching_producer_is_registered_and_dead_lettered_in_full(
        crawl_env, bus, store, instance, batching_producer):
    # kafka-python packs the burst into one record batch; the embedded broker's high watermark
    # then counts it as one record, so intake must find the log's end by reading it.
    good = [encode(crawl_request(f"burst-{i}", f"http://127.0.0.1:9/{i}")) for i in range(10)]
    bad = [b"{not json", b"", b"\xff\xfe", b'{"type":"crawl_request","v":1}', b"[]"]
    for payload in good[:5] + bad + good[5:]:
        batching_producer.send(crawl_env.seeds_topic, key=b"one-partition", value=payload)
    batching_producer.flush(10)
    result = _tick(seeds_sensor, instance)
    assert not result.run_requests  # registered in the sensor's own evaluation
    registered = {row[0] for row in store.query("SELECT crawl_id FROM crawls")}
    assert registered == {f"burst-{i}" for i in range(10)}
    letters = [decode_dead_letter(rec.value) for rec in all_records(bus, crawl_env.dead_letter_topic)]
    assert sorted(base64.b64decode(letter.payload_b64) for letter in letters) == sorted(bad)
    assert {letter.source_topic for letter in letters} == {crawl_env.seeds_topic}
    assert sorted(letter.offset for letter in letters) == [5, 6, 7, 8, 9]  # where each bad one was
    assert not _tick(seeds_sensor, instance, result.cursor).run_requests


def test_a_frontier_burst_from_a_batching_producer_is_planned_to_its_last_url(crawl_env, bus, instance,
                                                                             batching_producer, monkeypatch):
    monkeypatch.setenv("CRAWL_RUN_CONTINUE_S", "0")  # every batch at once, so the plan covers the burst
    # One record batch of 300 URLs: the embedded broker's high watermark stops at its first record,
    # so the sensor must cut by where the log really ends (KAFKA_EXACT_LOG_ENDS).
    for i in range(300):
        batching_producer.send(crawl_env.frontier_topic, key=b"burst.test",
                               value=encode(FrontierURL("c1", f"http://burst.test:9/p{i}", 1)))
    batching_producer.flush(10)
    planned = [parse_batch_key(r.partition_key)[1] for r in _tick(frontier_sensor, instance).run_requests]
    assert sum(r.end - r.start for ranges in planned for r in ranges) == 300


def test_no_batch_runs_while_dagster_yaml_leaves_frontier_partitions_unlimited(crawl_env, bus, tmp_path):
    # dagster.yaml written for 2 partitions; the topic has 4 (a larger topic, or a changed setting).
    write_instance_yaml(tmp_path / "home", partitions=2)
    urls = [FrontierURL("c1", f"http://h{h}.test:9/p{i}", 1) for h in range(24) for i in range(2)]
    assert all(publish_frontier(bus, urls))
    with DagsterInstance.from_config(str(tmp_path / "home")) as narrow:
        result = _tick(frontier_sensor, narrow)
    assert not result.run_requests
    assert result.skip_reason.skip_message == (
        "frontier partitions 2, 3 have no one-run-at-a-time limit in dagster.yaml (it limits 0, 1): add "
        "tag_concurrency_limits entries crawl/frontier_p2 … crawl/frontier_p3 with limit 1, or write it anew")
    assert result.cursor is None  # nothing was planned, so nothing is skipped either

    write_instance_yaml(tmp_path / "wide", partitions=4)
    with DagsterInstance.from_config(str(tmp_path / "wide")) as wide:
        assert _tick(frontier_sensor, wide).run_requests


def test_partitions_a_continuing_run_holds_are_left_to_it_and_what_it_landed_is_skipped(crawl_env, bus, store,
                                                                                          instance, monkeypatch):
    host_urls = [FrontierURL("c1", f"http://127.0.0.1:9/p{i}", 1) for i in range(60)]
    assert all(publish_frontier(bus, host_urls))
    partition = next(p for p, (_lo, hi) in bus.watermarks(crawl_env.frontier_topic).items() if hi)
    first = _tick(frontier_sensor, instance)
    # One batch of the two the backlog holds: its run goes on through the rest itself.
    assert [r.partition_key for r in first.run_requests] == [batch_key(0, OffsetRange(partition, 0, 50))]
    assert [r.run_config["ops"]["frontier"]["config"] for r in first.run_requests] == [{"continue_seconds": 60.0}]
    assert decode_cursor(first.cursor)[0][partition] == 50
    # A batch run holding the partition is queued or running: it reads the partition's new offsets itself.
    run = create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED,
                              tags={"crawl/partitions": str(partition)})
    assert all(publish_frontier(bus, host_urls[:10]))
    held = _tick(frontier_sensor, instance, first.cursor)
    assert not held.run_requests
    assert decode_cursor(held.cursor)[0][partition] == 50
    # The run went on to offsets 50-65 and landed them, then ended: the sensor cuts only the rest.
    land(store, batch_key(0, OffsetRange(partition, 50, 65)), [], [])
    instance.delete_run(run.run_id)
    after = _tick(frontier_sensor, instance, held.cursor)
    assert [r.partition_key for r in after.run_requests] == [batch_key(0, OffsetRange(partition, 65, 70))]
    assert decode_cursor(after.cursor)[0][partition] == 70


def test_without_continuation_runs_queue_ahead_on_a_held_partition(crawl_env, bus, instance, monkeypatch):
    monkeypatch.setenv("CRAWL_RUN_CONTINUE_S", "0")
    assert all(publish_frontier(bus, [FrontierURL("c1", "http://127.0.0.1:9/a", 0)]))
    partition = next(p for p, (_lo, hi) in bus.watermarks(crawl_env.frontier_topic).items() if hi)
    create_run_for_test(instance, job_name="crawl_batch_job", status=DagsterRunStatus.STARTED,
                        tags={"crawl/partitions": str(partition)})
    (request,) = _tick(frontier_sensor, instance).run_requests
    assert "frontier" not in request.run_config["ops"]
