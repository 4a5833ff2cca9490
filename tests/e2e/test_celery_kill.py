"""kill -9 of a Celery worker in the middle of a batch step: the task was acknowledged late, so
RabbitMQ hands it to the other worker, the step runs again there, and the crawl completes with
every page landed exactly once."""

import contextlib
import os
import signal
import subprocess
import time

import pytest

from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import CRAWL_PLATFORM, REPO, Sites, assert_landed_exactly_once

pytestmark = pytest.mark.e2e(seconds=230)


def _worker(env, log_path):
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the worker
    return subprocess.Popen([*CRAWL_PLATFORM, "worker", "--concurrency", "1"],
                            env=env, cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _busy(log_path):
    return "Executing steps" in log_path.read_text(errors="replace") or "execute_plan" in log_path.read_text(
        errors="replace")


def test_a_killed_celery_worker_costs_a_retry_not_pages(start_platform, tmp_path):
    settings, env = start_platform(executor="celery", celery_broker="pyamqp://guest:guest@127.0.0.1:5672//",
                                   celery_backend="rpc://", host_delay_ms=10, batch_size=150)
    logs = [tmp_path / "worker-a.log", tmp_path / "worker-b.log"]
    workers = [_worker(env, logs[0])]
    store = CrawlStore.from_settings(settings)
    try:
        time.sleep(5)
        with Sites(total_pages=1000, hosts=4, seed=21) as sites:
            waiter = subprocess.Popen([*CRAWL_PLATFORM, "crawl", *sites.seeds,
                                       "--crawl-id", "celery-kill", "--wait", "--timeout", "500"],
                                      env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 180
            # Wait until worker a is inside a batch step (a later batch: some pages already landed).
            while time.monotonic() < deadline:
                landed = store.query("SELECT count(*) FROM pages")[0][0] if store.exists() else 0
                if landed and _busy(logs[0]):
                    break
                time.sleep(0.2)
            workers.append(_worker(env, logs[1]))
            time.sleep(1.0)
            os.killpg(workers[0].pid, signal.SIGKILL)  # the whole worker machine is gone
            out, _ = waiter.communicate(timeout=520)
            assert waiter.returncode == 0, out + logs[1].read_text(errors="replace")[-3000:]
            expected = sites.expected_urls()
            assert len(expected) >= 1000
            assert_landed_exactly_once(store, "celery-kill", expected)
            assert "succeeded" in logs[1].read_text(errors="replace")  # worker b took over
    finally:
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(60)
