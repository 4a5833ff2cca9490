"""The scale-out profile: batch steps on a Celery worker (broker RabbitMQ or Redis, both real on
this machine), Dagster state and the lake's catalog on PostgreSQL (no file of the store on the
workers' shared path but Parquet), started with `crawl-platform worker` as documented. The broker
URL reaches the runs and the worker through their environment: no run's config holds it."""

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import celery_worker, cli

pytestmark = pytest.mark.e2e(seconds=160)

BROKERS = {
    # Not the default spelling (127.0.0.1): a URL with a password that only the environment holds.
    "rabbitmq": ("pyamqp://guest:guest@localhost:5672//", "rpc://"),
    "redis": ("redis://127.0.0.1:6379/3", "redis://127.0.0.1:6379/4"),
}


@pytest.mark.parametrize("broker_name", sorted(BROKERS))
def test_batch_steps_run_on_a_celery_worker_and_land_the_whole_site(start_platform, broker_name, tmp_path):
    broker_url, backend = BROKERS[broker_name]
    settings, env = start_platform(executor="celery", celery_broker=broker_url, celery_backend=backend,
                                   host_delay_ms=0, batch_size=100, lake_on_postgres=True)
    assert settings.lake_catalog.startswith("postgres:")
    with (celery_worker(env, tmp_path / "worker.log", "--concurrency", "2"),
          DemoSite(n_pages=50, seed=5).serve() as server):
        done = cli(env, "crawl", server.base_url + "/", "--crawl-id", f"celery-{broker_name}",
                   "--wait", "--timeout", "300")
        assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "worker.log").read_text()[-3000:]
        store = CrawlStore.from_settings(settings)
        urls = [r[0] for r in store.query("SELECT url FROM pages")]
        assert sorted(urls) == sorted(server.site.expected_urls(server.base_url))
        # Every landing was a snapshot of the PostgreSQL catalog; the shared path holds only Parquet.
        (snapshots,) = store.query("SELECT count(*) FROM ducklake_snapshots(?)", [store.alias])[0]
        assert snapshots > 2
        shared = {p.suffix for p in Path(settings.lake_data_path).rglob("*") if p.is_file()}
        assert shared == {".parquet"}
        assert not list(settings.lake_path.rglob("catalog.sqlite*"))  # no embedded catalog anywhere
    worker_log = (tmp_path / "worker.log").read_text()
    # The worker, not the run process, executed the batch steps.
    assert "dagster_celery.tasks.execute_plan" in worker_log or "execute_plan" in worker_log, worker_log[-2000:]
    assert "succeeded" in worker_log
    assert "guest:guest" not in worker_log
    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        runs = [r for r in instance.get_runs() if r.job_name == "crawl_batch_celery_job"]
    assert runs
    for run in runs:
        assert run.run_config["execution"]["config"]["broker"] == {"env": "CRAWL_CELERY_BROKER"}
        assert broker_url not in json.dumps(run.run_config)


def test_celery_workers_share_no_folder_with_the_lake_archive_and_handoff_in_a_bucket(start_platform, s3_server,
                                                                                      tmp_path):
    """The lake's Parquet files, the raw archive and the handoff between a run's steps in object
    storage (a real S3 server on loopback), the catalog on PostgreSQL: the run process and the
    Celery worker hand the batch over through the bucket, and no folder of the platform's is shared."""
    bucket = s3_server.new_bucket()
    broker_url, backend = BROKERS["redis"]
    store_settings = s3_server.settings_update()
    settings, env = start_platform(
        executor="celery", celery_broker=broker_url, celery_backend=backend, host_delay_ms=0, batch_size=100,
        lake_on_postgres=True, lake_data_path=f"s3://{bucket}/lake/", handoff_dir=f"s3://{bucket}/handoff/",
        **{**store_settings, "aws_secret_access_key": store_settings["aws_secret_access_key"].get_secret_value()})
    with (celery_worker(env, tmp_path / "worker.log", "--concurrency", "2"),
          DemoSite(n_pages=30, seed=6).serve() as server):
        done = cli(env, "crawl", server.base_url + "/", "--crawl-id", "celery-s3", "--wait", "--timeout", "300")
        assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "worker.log").read_text()[-3000:]
        store = CrawlStore.from_settings(settings)
        urls = [r[0] for r in store.query("SELECT url FROM pages")]
        assert sorted(urls) == sorted(server.site.expected_urls(server.base_url))
        assert store.query("SELECT count(*) FROM pages WHERE warc_file IS NULL") == [(0,)]
    files = s3_server.bucket_files(bucket)
    assert [f for f in files if f.startswith("archive/") and f.endswith(".warc.gz")]
    assert not [f for f in files if f.startswith("handoff/")]  # removed once each batch landed
    assert not list(settings.lake_path.parent.rglob("*.pickle"))  # the handoff went through the bucket
    assert not list(settings.lake_path.parent.rglob("*.parquet"))  # nothing of the lake on this disk
    assert not list(settings.lake_path.parent.rglob("*.warc.gz"))
    assert "crawl-test-secret" not in (tmp_path / "worker.log").read_text()
