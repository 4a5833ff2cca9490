"""The handoff between a batch run's steps through object storage: no shared folder.

With ``CRAWL_HANDOFF_DIR=s3://…`` (a real S3 server on loopback, ``rclone serve s3``), a batch's
fetch step puts its pickle in the bucket, the landing step reads it from there, the batch lands,
and the bucket is empty again once it has; nothing is written under a local handoff folder.
"""

from __future__ import annotations

from pathlib import Path

from dagster import materialize

from crawl_platform.bus.offsets import batch_key
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform.storage import ObjectStore
from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.crawl_batch import crawl_batch, frontier
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.resources.settings import platform_settings
from tests.dagster.conftest import RESOURCES
from tests.dagster.test_assets import _ranges


def test_a_batch_hands_its_pages_over_through_a_bucket(crawl_env, bus, store, site, instance, s3_server,
                                                       monkeypatch):
    bucket = s3_server.new_bucket()
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CRAWL_HANDOFF_DIR", f"s3://{bucket}/handoff/")
    written: list[str] = []  # the keys the steps put, seen on the client their settings give
    ObjectStore.from_settings(platform_settings()).client().meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: written.append(params["Key"]))

    submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="c1", max_depth=1))
    seed_keys = [r.key for r in _ranges(bus, crawl_env.seeds_topic)]
    assert materialize([crawls], instance=instance, resources=RESOURCES,
                       run_config={"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}).success
    (seed_range,) = _ranges(bus, crawl_env.frontier_topic)
    key = batch_key(0, seed_range)
    instance.add_dynamic_partitions("frontier_batches", [key])
    result = materialize([crawl_batch, frontier, *quality_checks], partition_key=key, instance=instance,
                         resources=RESOURCES)

    assert result.success
    assert store.query("SELECT url, version, batch_id FROM pages") == [(site.base_url + "/", 1, key)]
    handed = [k for k in written if k.startswith("handoff/") and k.endswith(".pickle")]
    assert any("/crawl_batch.fetch_shard" in k for k in handed)  # the fetch step's pages went through the bucket
    assert s3_server.bucket_files(bucket) == []  # and were removed once the batch landed
    assert not Path(crawl_env.handoff_dir).exists()
