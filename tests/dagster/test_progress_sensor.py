"""crawl_progress observations: per-crawl progress and the frontier's Kafka lag behind the
frontier sensor's stored cursor; and the UI opens without Dagster's sign-up dialog."""

import json

from dagster import AssetKey, AssetObservation, SensorResult, build_sensor_context, instance_for_test, materialize
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteInstigatorOrigin, RemoteRepositoryOrigin
from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, InstigatorType, SensorInstigatorData
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.offsets import decode_cursor
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.instance import PARTITION_TAG_PREFIX
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.kafka import frontier_sensor
from crawl_platform_dagster.sensors.monitoring import crawl_progress_sensor, frontier_sensor_cursor
from tests.dagster.conftest import RESOURCES

SENSOR_RESOURCES = {"crawl": CrawlSettingsResource()}


def _store_frontier_cursor(instance, cursor):
    """What the daemon does after a frontier-sensor tick: keep its cursor in the instance."""
    repo = RemoteRepositoryOrigin(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="crawl_platform_dagster.definitions")), "__repository__")
    state = InstigatorState(RemoteInstigatorOrigin(repo, "frontier_sensor"), InstigatorType.SENSOR,
                            InstigatorStatus.RUNNING, SensorInstigatorData(cursor=cursor, last_tick_timestamp=1.0))
    if frontier_sensor_cursor(instance) is None:
        instance.add_instigator_state(state)
    else:
        instance.update_instigator_state(state)


def _observe(instance, cursor=None) -> tuple[dict, str]:
    result = crawl_progress_sensor(build_sensor_context(instance=instance, cursor=cursor, resources=SENSOR_RESOURCES))
    assert isinstance(result, SensorResult)
    (event,) = result.asset_events
    assert isinstance(event, AssetObservation)
    assert event.asset_key == AssetKey("crawl_progress")
    # What the daemon does with a tick's asset events; the UI plots the stored observations.
    before = len(instance.fetch_observations(AssetKey("crawl_progress"), limit=100).records)
    instance.report_runless_asset_event(event)
    (latest, *_rest) = instance.fetch_observations(AssetKey("crawl_progress"), limit=100).records
    assert before + 1 == len([latest, *_rest])
    assert latest.asset_observation.metadata == event.metadata
    return {k: v.value for k, v in event.metadata.items()}, result.cursor


def _earlier(cursor: str, seconds: float) -> str:
    """The cursor as if its observation had been ``seconds`` earlier (ticks are a minute apart)."""
    body = json.loads(cursor)
    body["at"] -= seconds
    return json.dumps(body)


def test_progress_is_observed_per_crawl_with_the_frontier_lag(crawl_env, bus, site):
    assert "crawl_progress" in {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    # The platform's run queue: one run at a time per frontier partition (the frontier sensor
    # launches nothing on an instance that leaves a partition unlimited).
    limits = [{"key": f"{PARTITION_TAG_PREFIX}{p}", "limit": 1} for p in range(crawl_env.topic_partitions)]
    with instance_for_test(overrides={"concurrency": {"runs": {"tag_concurrency_limits": limits}}}) as instance:
        submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="mon-1", max_depth=1))
        tick = frontier_sensor(build_sensor_context(instance=instance, resources=SENSOR_RESOURCES))
        # The seeds have not been registered yet: the frontier topic is empty.
        _store_frontier_cursor(instance, tick.cursor)
        from crawl_platform_dagster.sensors.kafka import seeds_sensor  # noqa: PLC0415

        seeds = seeds_sensor(build_sensor_context(instance=instance, resources=SENSOR_RESOURCES))
        assert not seeds.run_requests
        assert seeds.asset_events

        figures, cursor = _observe(instance)
        # The seed was published after the frontier sensor's cursor: one message of lag.
        assert figures["pending"] == 1
        assert figures["mon-1/pending"] == 1
        assert figures["mon-1/fetched"] == 0
        assert figures["frontier_lag"] == 1
        assert sum(v for k, v in figures.items() if k.startswith("frontier_lag_p")) == 1

        # The frontier sensor hands the seed to a batch; the batch lands and admits the seed's links.
        tick = frontier_sensor(build_sensor_context(instance=instance, cursor=tick.cursor,
                                                    resources=SENSOR_RESOURCES))
        _store_frontier_cursor(instance, tick.cursor)
        assert frontier_sensor_cursor(instance) == tick.cursor
        (request,) = tick.run_requests
        instance.add_dynamic_partitions("frontier_batches", [request.partition_key])
        assert materialize([crawl_batch, frontier], partition_key=request.partition_key, instance=instance,
                           resources=RESOURCES).success
        extra = [FrontierURL("mon-1", f"{site.base_url}/extra-{i}", 1) for i in range(3)]
        assert all(publish_frontier(bus, extra))

        previous = _earlier(cursor, 60)
        figures, cursor = _observe(instance, previous)
        elapsed = json.loads(cursor)["at"] - json.loads(previous)["at"]  # a minute, and the batch's seconds
        links = figures["mon-1/pending"]
        assert links > 0  # the seed's links, admitted and published
        assert figures["mon-1/fetched"] == 1
        assert figures["fetched"] == 1
        assert figures["pages_per_second"] == round(1 / elapsed, 2)
        assert figures["mon-1/pages_per_second"] == round(1 / elapsed, 2)
        watermarks = bus.watermarks(crawl_env.frontier_topic)
        handed_out, _epoch = decode_cursor(tick.cursor)
        assert figures["frontier_lag"] == sum(high - handed_out.get(p, 0) for p, (_low, high) in watermarks.items())
        assert figures["frontier_lag"] == links + 3  # the links the batch published, and the 3 published here

        # Within CRAWL_MONITOR_INTERVAL of the last observation: nothing new.
        quiet = crawl_progress_sensor(build_sensor_context(instance=instance, cursor=cursor,
                                                           resources=SENSOR_RESOURCES))
        assert not isinstance(quiet, SensorResult)
