"""The quality sensor: landed batches are checked by Great Expectations in one run, off the batch runs."""

from dagster import SensorResult, build_sensor_context, materialize

from crawl_platform.bus.offsets import batch_key, plan_batches
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.sensors.quality import quality_sensor
from tests.dagster.conftest import RESOURCES


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

    tick = quality_sensor(build_sensor_context(instance=instance))
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
    again = quality_sensor(build_sensor_context(instance=instance, cursor=tick.cursor))
    assert not getattr(again, "run_requests", None)


def test_a_bad_row_fails_the_check_of_its_batch(crawl_env, bus, store, site, instance):
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="q2", max_depth=0))
    seeds = _ranges(bus, crawl_env.seeds_topic)
    assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
        "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges]}}}}).success
    key = batch_key(0, _ranges(bus, crawl_env.frontier_topic).batches[0])
    instance.add_dynamic_partitions("frontier_batches", [key])
    assert materialize([crawl_batch, frontier], partition_key=key, instance=instance, resources=RESOURCES).success
    with store.write() as con:
        con.execute("UPDATE pages SET content_hash = 'not-a-hash' WHERE batch_id = ?", [key])
    (request,) = quality_sensor(build_sensor_context(instance=instance)).run_requests
    job = defs.resolve_job_def("crawl_quality_job")
    result = job.execute_in_process(run_config=request.run_config, instance=instance, resources=RESOURCES)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["pages_quality"].passed
    assert evaluations["documents_quality"].passed
