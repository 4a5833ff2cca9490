"""Crawl control and priority in Dagster: the Launchpad control jobs put commands on the control
topic, the control sensor turns them into a crawl_control_job run that applies them, and batch
runs carry the priority of their crawls as ``dagster/priority``."""

from dagster import SensorResult, build_sensor_context, validate_run_config

from crawl_platform.bus.messages import CrawlRequest, decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.control import build_control
from crawl_platform.states import CrawlState
from crawl_platform_dagster.assets.control import crawl_control_job, pause_crawl_job, resume_crawl_job
from crawl_platform_dagster.assets.intake import submit_crawl_job
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.kafka import control_sensor, frontier_sensor
from tests.dagster.conftest import RESOURCES
from tests.unit.crawl_rows import frontier_rows


def _tick(sensor, instance, cursor=None) -> SensorResult:
    context = build_sensor_context(instance=instance, cursor=cursor, resources={"crawl": CrawlSettingsResource()})
    result = sensor(context)
    assert isinstance(result, SensorResult)
    return result


def _apply(run_request, instance) -> None:
    assert validate_run_config(crawl_control_job, run_request.run_config)
    assert crawl_control_job.execute_in_process(run_config=run_request.run_config, instance=instance,
                                                resources=RESOURCES).success


def test_launchpad_pause_and_resume_travel_on_the_control_topic_to_a_control_run(crawl_env, bus, store, instance):
    frontier = Frontier(store, bus)
    frontier.register(CrawlRequest("dg-ctl", ("http://127.0.0.1:9/",), 10, 1, "host", 0.0))
    config = {"ops": {"submit_pause": {"config": {"crawl_id": "dg-ctl"}}}}
    assert pause_crawl_job.execute_in_process(run_config=config, resources=RESOURCES).success
    assert frontier.status("dg-ctl")[0].state == "active"  # only on the topic so far
    first = _tick(control_sensor, instance)
    (run,) = first.run_requests
    assert run.job_name is None or run.job_name == crawl_control_job.name
    assert run.run_key.startswith("control-e0-")
    _apply(run, instance)
    assert frontier.status("dg-ctl")[0].state == "paused"
    assert frontier_rows(store, "dg-ctl") == {"http://127.0.0.1:9/": (0, "paused")}
    quiet = _tick(control_sensor, instance, first.cursor)
    assert not quiet.run_requests
    assert quiet.skip_reason.skip_message == "no new control commands"
    config = {"ops": {"submit_resume": {"config": {"crawl_id": "dg-ctl"}}}}
    assert resume_crawl_job.execute_in_process(run_config=config, resources=RESOURCES).success
    (again,) = _tick(control_sensor, instance, first.cursor).run_requests
    _apply(again, instance)
    assert frontier.status("dg-ctl")[0].state == "active"
    assert frontier_rows(store, "dg-ctl") == {"http://127.0.0.1:9/": (0, "queued")}


def test_batch_runs_carry_the_priority_of_their_crawls(crawl_env, bus, store, instance):
    frontier = Frontier(store, bus)
    hosts = [f"127.0.0.1:{9000 + i}" for i in range(40)]
    by_partition = {}
    for host in hosts:
        by_partition.setdefault(bus.partition_of(host.encode(), crawl_env.topic_partitions), host)
    low_host, high_host = list(by_partition.values())[:2]
    frontier.register(CrawlRequest("dg-low", (f"http://{low_host}/",), 10, 1, "host", 0.0))
    frontier.register(CrawlRequest("dg-high", (f"http://{high_host}/",), 10, 1, "host", 0.0, priority=50))
    result = _tick(frontier_sensor, instance)
    tags = {r.tags["crawl/partitions"]: r.tags["dagster/priority"] for r in result.run_requests}
    high_partition = str(bus.partition_of(high_host.encode(), crawl_env.topic_partitions))
    low_partition = str(bus.partition_of(low_host.encode(), crawl_env.topic_partitions))
    # Clamped to CRAWL_MAX_PRIORITY (10 by default); the QueuedRunCoordinator starts it first.
    assert {k: v for k, v in tags.items() if k in (high_partition, low_partition)} == {
        high_partition: "10", low_partition: "0"}
    assert result.run_requests[0].tags["crawl/partitions"] == high_partition


def test_launchpad_crawl_takes_its_policies(crawl_env, bus):
    config = {"ops": {"submit_crawl_request": {"config": {
        "seeds": ["http://127.0.0.1:9/"], "crawl_id": "lp-policies", "host_delay_ms": 800, "host_concurrency": 2,
        "priority": 4}}}}
    assert submit_crawl_job.execute_in_process(run_config=config, resources=RESOURCES).success
    (request,) = [decode_crawl_request(r.value) for p, (lo, hi) in bus.watermarks(crawl_env.seeds_topic).items()
                  if hi > lo for r in bus.read_range(crawl_env.seeds_topic, OffsetRange(p, lo, hi))]
    assert (request.crawl_id, request.host_delay_ms, request.host_concurrency, request.priority) == (
        "lp-policies", 800, 2, 4)
    bad = {"ops": {"submit_crawl_request": {"config": {"seeds": ["http://127.0.0.1:9/"], "priority": -1}}}}
    result = submit_crawl_job.execute_in_process(run_config=bad, resources=RESOURCES, raise_on_error=False)
    assert not result.success
    assert "priority must be between 0 and 1000000, not -1" in \
        result.get_step_failure_events()[0].step_failure_data.error.message


def test_a_runs_fetch_and_render_steps_read_their_crawls_states_from_the_lake(crawl_env, bus, store):
    """The resource's shard fetcher and renderer watch the crawls' states in the run's lake, so a
    pause or cancel stops a fetch step already running (crawl_platform.pipeline.control_watch)."""
    frontier = Frontier(store, bus)
    for crawl_id in ("dg-on", "dg-paused", "dg-gone"):
        frontier.register(CrawlRequest(crawl_id, ("http://127.0.0.1:9/",), 10, 1, "host", 0.0))
    frontier.control(build_control("dg-paused", "pause"))
    frontier.control(build_control("dg-gone", "cancel"))
    crawl = CrawlSettingsResource()
    fetcher = crawl.shard_fetcher(pages=1)
    renderer = crawl.shard_renderer()
    try:
        for states in (fetcher.crawl_states, renderer.crawl_states):
            assert states is not None
            assert states({"dg-on", "dg-paused", "dg-gone"}) == {
                "dg-on": CrawlState.ACTIVE, "dg-paused": CrawlState.PAUSED, "dg-gone": CrawlState.CANCELLED}
    finally:
        fetcher.close()
        renderer.close()
