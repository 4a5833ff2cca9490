"""The scale-out profile: batch steps on a Celery worker (broker RabbitMQ or Redis, both real on
this machine), Dagster state and the lake's catalog on PostgreSQL (no file of the store on the
workers' shared path but Parquet), started with `crawl-platform worker` as documented. The broker
URL reaches the runs and the worker through their environment: no run's config holds it."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import CRAWL_PLATFORM, REPO, cli

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
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen([*CRAWL_PLATFORM, "worker", "--concurrency", "2"],
                              env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(5)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        with DemoSite(n_pages=50, seed=5).serve() as server:
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
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)
        log.close()
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
