"""Assets materialised through Dagster against a real broker, DuckDB file and demo site."""

import hashlib
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import Failure, build_op_context, materialize

from crawl_platform.archive.reader import read_response
from crawl_platform.bus.messages import decode_crawl_request
from crawl_platform.bus.offsets import batch_key, parse_batch_key, plan_batches
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform.urls import host_of
from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier, land_batch
from crawl_platform_dagster.assets.intake import crawls, submit_crawl_job
from crawl_platform_dagster.resources import crawl as crawl_resources
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from tests.dagster.conftest import RESOURCES


def _ranges(bus, topic):
    return plan_batches(bus.watermarks(topic), {}, batch_size=1000, max_batches=100).ranges


def _materialize_batch(instance, key, **kwargs):
    instance.add_dynamic_partitions("frontier_batches", [key])
    return materialize([crawl_batch, frontier, *quality_checks], partition_key=key, instance=instance,
                       resources=RESOURCES, **kwargs)


def test_seed_intake_then_one_batch_lands_pages_with_metadata_and_checks(crawl_env, bus, store, site, instance):
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="c1", max_depth=1))
    seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
    intake = materialize([crawls], instance=instance, resources=RESOURCES,
                         run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}})
    assert intake.success
    meta = intake.asset_materializations_for_node("crawls")[0].metadata
    assert meta["crawls_registered"].value == 1
    assert meta["seeds_admitted"].value == 1

    (seed_range,) = _ranges(bus, crawl_env.frontier_topic)
    key = batch_key(0, seed_range)
    result = _materialize_batch(instance, key)
    assert result.success
    pages_meta = next(m for m in result.get_asset_materialization_events()
                      if m.asset_key.to_user_string() == "pages").materialization.metadata
    assert pages_meta["pages_fetched"].value == 1
    assert pages_meta["new_versions"].value == 1
    frontier_meta = result.asset_materializations_for_node("frontier")[0].metadata
    home_links = {u for u in site.site.expected_urls_within_depth(site.base_url, 1) if u != site.base_url + "/"}
    assert frontier_meta["new_urls"].value == len(home_links)
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {"pages_quality", "documents_quality"}
    assert all(c.passed for c in checks)
    assert store.query("SELECT url, version, batch_id FROM pages") == [(site.base_url + "/", 1, key)]
    # The fetch step archived the response in a file named by its batch and shard; pages points at it.
    ((warc_file, offset, length, digest),) = store.query("SELECT warc_file, warc_offset, warc_length, content_hash "
                                                         "FROM pages")
    assert f"/{key}-s0-" in warc_file
    assert hashlib.sha256(b"200\n" + read_response(store.archive, warc_file, offset, length)[1]).hexdigest() \
        == digest

    # Re-materialising the partition refetches exactly that batch and adds no rows.
    requests_before = site.request_count("/")
    counts = store.query("SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM documents), "
                         "(SELECT count(*) FROM links), (SELECT count(*) FROM frontier)")
    again = _materialize_batch(instance, key)
    assert again.success
    assert site.request_count("/") == requests_before + 1
    # The demo site sends no validators: the same body again, which is not parsed (it lands nothing).
    again_meta = next(m for m in again.get_asset_materialization_events()
                      if m.asset_key.to_user_string() == "pages").materialization.metadata
    assert (again_meta["unchanged_not_parsed"].value, again_meta["new_versions"].value) == (1, 0)
    assert store.query("SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM documents), "
                       "(SELECT count(*) FROM links), (SELECT count(*) FROM frontier)") == counts


def test_launchpad_job_submits_a_validated_crawl(crawl_env, bus):
    config = {"ops": {"submit_crawl_request": {"config": {
        "seeds": ["http://127.0.0.1:9/start"], "crawl_id": "from-launchpad", "max_pages": 7, "max_depth": 2}}}}
    assert submit_crawl_job.execute_in_process(run_config=config, resources=RESOURCES).success
    (r,) = _ranges(bus, crawl_env.seeds_topic)
    (record,) = bus.read_range(crawl_env.seeds_topic, r)
    request = decode_crawl_request(record.value)
    assert (request.crawl_id, request.seeds, request.max_pages, request.max_depth) == (
        "from-launchpad", ("http://127.0.0.1:9/start",), 7, 2)


def test_launchpad_job_rejects_a_bad_seed_and_enqueues_nothing(crawl_env, bus):
    config = {"ops": {"submit_crawl_request": {"config": {"seeds": ["ftp://nope"]}}}}
    result = submit_crawl_job.execute_in_process(run_config=config, resources=RESOURCES, raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert "only http and https" in failure.message
    assert all(hi == 0 for _lo, hi in bus.watermarks(crawl_env.seeds_topic).values())


def _register_and_fetch_level(instance, bus, crawl_env, store, seeds, crawl_id, shards):
    submit_crawl(bus, build_crawl_request(seeds, crawl_id=crawl_id, max_depth=1))
    seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
    assert materialize([crawls], instance=instance, resources=RESOURCES,
                       run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
    key = batch_key(0, _ranges(bus, crawl_env.frontier_topic))
    config = {"ops": {"crawl_batch": {"ops": {"plan_batch": {"config": {"shards": shards, "min_shard_urls": 1}}}}}}
    return key, _materialize_batch(instance, key, run_config=config)


def _sites_over_two_partitions(bus, partitions: int) -> list:
    """Three demo sites, on ports whose hosts the frontier topic puts in at least two partitions
    (random ports all land in one partition one time in sixteen)."""
    sites = [DemoSite(n_pages=5, seed=s).serve() for s in range(3)]
    while len({bus.partition_of(host_of(s.base_url + "/").encode(), partitions) for s in sites}) < 2:
        sites.pop().close()
        sites.append(DemoSite(n_pages=5, seed=2).serve())
    return sites


def test_a_batch_over_several_partitions_fans_out_into_host_shards_and_lands_once(crawl_env, bus, store, instance):
    sites = _sites_over_two_partitions(bus, crawl_env.topic_partitions)
    with sites[0] as a, sites[1] as b, sites[2] as c:
        seeds = [s.base_url + "/" for s in (a, b, c)]
        key, result = _register_and_fetch_level(instance, bus, crawl_env, store, seeds, "multi", shards=2)
        assert result.success
        assert len(parse_batch_key(key)[1]) >= 2  # three hosts, spread over several partitions
        fetch_steps = {e.step_key for e in result.get_step_success_events()
                       if e.step_key.startswith("crawl_batch.fetch_shard")}
        assert len(fetch_steps) == 2  # three hosts balanced onto two shards
        pages_meta = next(m for m in result.get_asset_materialization_events()
                          if m.asset_key.to_user_string() == "pages").materialization.metadata
        assert pages_meta["shards"].value == 2
        assert sorted(store.query("SELECT url FROM pages")) == sorted((u,) for u in seeds)
        # The handoff between steps is gone once the batch landed.
        assert not any(Path(crawl_env.handoff_dir).rglob("*.pickle"))
        assert all(s.request_count("/") == 1 for s in (a, b, c))


def test_a_retry_whose_handoff_is_gone_skips_a_landed_batch_and_fails_an_unlanded_one(crawl_env, bus, store, site,
                                                                                        instance):
    """A run killed after land_batch committed but before Dagster recorded its success is retried
    from that step; its handoff was removed with the landing, so the retry must see the batch in
    DuckDB and do nothing, and must fail loudly for a batch that never landed."""
    key, result = _register_and_fetch_level(instance, bus, crawl_env, store, [site.base_url + "/"], "gone", 1)
    assert result.success
    rows = store.query("SELECT count(*) FROM pages")[0][0]
    with build_op_context(partition_key=key, resources={"crawl": CrawlSettingsResource()}) as context:
        outputs = list(land_batch(context, prepared=None, shards=[None], renderings=[None]))
    assert [o.output_name for o in outputs] == ["pages", "documents", "links"]
    assert all(o.metadata["already_landed"].value is True for o in outputs)
    assert store.query("SELECT count(*) FROM pages")[0][0] == rows
    with build_op_context(partition_key="e9.p0-0-5", resources={"crawl": CrawlSettingsResource()}) as context, \
            pytest.raises(Failure, match="never landed"):
        list(land_batch(context, prepared=None, shards=[None], renderings=[None]))


def test_a_batch_run_goes_on_to_the_next_batches_each_materialised_as_its_own_partition(crawl_env, bus, store, site,
                                                                                        instance):
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="next-batches", max_depth=3))
    seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
    assert materialize([crawls], instance=instance, resources=RESOURCES,
                       run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
    (seed_range,) = _ranges(bus, crawl_env.frontier_topic)
    key = batch_key(0, seed_range)
    result = _materialize_batch(instance, key, run_config={"ops": {"frontier": {"config": {"continue_seconds": 60}}}})
    assert result.success
    events = [e.materialization for e in result.get_asset_materialization_events()]
    by_asset: dict[str, list[str]] = {}
    for m in events:
        by_asset.setdefault(m.asset_key.to_user_string(), []).append(m.partition)
    continued = [p for p in by_asset["pages"] if p != key]
    assert len(continued) >= 2  # 50 messages a batch: the site's link levels take several
    assert all(sorted(by_asset[a]) == sorted([key, *continued]) for a in ("pages", "documents", "links", "frontier"))
    assert set(continued) <= set(instance.get_dynamic_partitions("frontier_batches"))
    # Each batch starts where the one before ended, and every page within the depth landed once.
    ends = [seed_range.end]
    for batch in continued:
        (r,) = parse_batch_key(batch)[1]
        assert (r.partition, r.start) == (seed_range.partition, ends[-1])
        ends.append(r.end)
    fetched = sum(m.metadata["pages_fetched"].value + m.metadata["errors"].value  # a 404 page is an error
                  for m in events if m.asset_key.to_user_string() == "pages")
    expected = site.site.expected_urls_within_depth(site.base_url, 3)
    assert sorted(u for (u,) in store.query("SELECT url FROM pages")) == sorted(expected)
    assert fetched == len(expected)
    own = next(m for m in events if m.asset_key.to_user_string() == "frontier" and m.partition == key)
    assert own.metadata["batches_continued"].value == len(continued)


def test_a_runs_steps_share_one_set_of_parse_workers_that_outlives_them(crawl_env, bus, store, site, instance,
                                                                         monkeypatch):
    for workers in crawl_resources._RUN_PARSE_WORKERS.values():  # an earlier test's, in this process
        workers.close()
    crawl_resources._RUN_PARSE_WORKERS.clear()
    started: list[int] = []
    original = ParseWorkers.__init__

    def counted(self: ParseWorkers, count: int) -> None:
        started.append(count)
        original(self, count)

    monkeypatch.setattr(ParseWorkers, "__init__", counted)
    for crawl_id in ("shared-1", "shared-2"):  # two runs in this process, each over several levels
        submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id=crawl_id, max_depth=2))
        seeds = plan_batches(bus.watermarks(crawl_env.seeds_topic), {}, batch_size=1000, max_batches=100)
        assert materialize([crawls], instance=instance, resources=RESOURCES, run_config={
            "ops": {"crawls": {"config": {"seed_ranges": [r.key for r in seeds.ranges[-1:]]}}}}).success
        latest = max(_ranges(bus, crawl_env.frontier_topic), key=lambda r: r.end)
        result = _materialize_batch(instance, batch_key(0, latest),
                                    run_config={"ops": {"frontier": {"config": {"continue_seconds": 60}}}})
        assert result.success
        own = next(m.materialization for m in result.get_asset_materialization_events()
                   if m.materialization.asset_key.to_user_string() == "frontier"
                   and m.materialization.partition == batch_key(0, latest))
        assert own.metadata["batches_continued"].value >= 1
    # Started once (by the first run's frontier step: its seed batch was too small for them, see
    # CRAWL_PARSE_WORKERS_FROM); every later level of both runs parsed with them.
    assert [count for count in started if count] == [Settings().parse_workers]  # 0: the seed's, parsed in the step
    workers = crawl_resources.run_parse_workers(Settings())
    assert workers is not None
    assert len(workers.pids()) == Settings().parse_workers
    assert all(Path(f"/proc/{pid}").exists() for pid in workers.pids())  # still running for the next run


def test_a_seed_batch_starts_no_parse_workers_and_its_fetch_step_parses_it_itself():
    for workers in crawl_resources._RUN_PARSE_WORKERS.values():  # an earlier test's, in this process
        workers.close()
    crawl_resources._RUN_PARSE_WORKERS.clear()
    crawl = CrawlSettingsResource()
    small = Settings().parse_workers_from - 1
    crawl.start_parse_workers(small)  # the plan step of a batch of that many messages
    assert crawl_resources.run_parse_workers(Settings(), start=False) is None
    fetcher = crawl.shard_fetcher(shared_workers=True, pages=small)
    try:
        assert crawl_resources.run_parse_workers(Settings(), start=False) is None
        assert fetcher.workers_from == Settings().parse_workers_from  # nor does it start its own
    finally:
        fetcher.close()
    crawl.start_parse_workers(Settings().parse_workers_from)  # a batch that is worth them
    workers = crawl_resources.run_parse_workers(Settings(), start=False)
    assert workers is not None
    lent = crawl.shard_fetcher(shared_workers=True, pages=1)  # once up, even a small shard uses them
    assert lent._workers is workers
    lent.close()


def _start_run_workers_and_return() -> None:
    """A forked run's body in short: the run's steps start the shared workers, then it returns."""
    workers = crawl_resources.run_parse_workers(Settings())
    assert workers is not None
    future = workers.submit([], "lxml", True)
    assert future is not None
    assert future.result() == []  # a worker has started and parsed


def test_a_forked_run_that_started_its_parse_workers_exits_when_it_returns():
    """The run launcher forks each run as a multiprocessing child, which joins its children on
    the way out: the run's idle workers must end first, or the run's process never exits."""
    child = multiprocessing.get_context("forkserver").Process(target=_start_run_workers_and_return)
    child.start()
    child.join(60)
    try:
        assert not child.is_alive()
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()


HOLD_THE_LAKE = """
import sys, time
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
with CrawlStore.from_settings(Settings()).write():
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_a_landing_step_that_fails_is_retried_from_the_fetch_steps_handoff_without_fetching_again(
        crawl_env, bus, store, site, instance):
    """Another process holds the lake's write lock longer than the landing step waits: the step
    fails, and its retries land the batch from the fetch step's handoff. The site sees each page
    once, and the fetch step ran once."""
    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="retry", max_depth=1))
    seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
    assert materialize([crawls], instance=instance, resources=RESOURCES,
                       run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
    key = batch_key(0, _ranges(bus, crawl_env.frontier_topic))
    store.write_timeout_s = 1.0  # the run's steps share this process's store
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LAKE, "8"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        result = _materialize_batch(instance, key)
    finally:
        holder.wait(30)
        store.write_timeout_s = crawl_env.lake_write_timeout_s
    assert result.success
    steps = [(e.step_key, e.event_type_value) for e in result.all_events if e.step_key]
    assert ("crawl_batch.land_batch", "STEP_RESTARTED") in steps
    assert [k for k, kind in steps if kind == "STEP_START" and k.startswith("crawl_batch.fetch_shard")] == [
        "crawl_batch.fetch_shard[s0]"]
    assert store.query("SELECT url FROM pages") == [(site.base_url + "/",)]
    assert site.request_count("/") == 1
