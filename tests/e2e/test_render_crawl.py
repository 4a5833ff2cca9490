"""Rendering as a user runs it: ``crawl-platform crawl --render`` of a single-page-app site on the
platform (the Dagster daemon, its sensors and runs), with the batch steps in the runs' own process
and with them on Celery, where a worker of the render queue renders and one of the fetch queue
fetches. Needs Debian's ``chromium`` (``.ci/run`` installs it)."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from crawl_platform.store.database import CrawlStore
from tests.conftest import requires_browser
from tests.e2e.conftest import CRAWL_PLATFORM, REPO, cli
from tests.sites.spa import RULES, SpaSite

pytestmark = [pytest.mark.e2e(seconds=150),
              requires_browser]


def _crawl_spa(env, settings, crawl_id: str, render: str, tmp_path: Path, logs: str = "") -> tuple[SpaSite, CrawlStore]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    with SpaSite(products=5) as spa:
        done = cli(env, "crawl", spa.base_url + "/", "--crawl-id", crawl_id, "--render", render,
                   "--extract", str(rules), "--wait", "--timeout", "300")
        assert done.returncode == 0, done.stdout + done.stderr + logs
    store = CrawlStore.from_settings(settings)
    rows = store.query("SELECT url, rendered FROM pages WHERE crawl_id = ?", [crawl_id])
    assert sorted(rows) == sorted((url, True) for url in spa.pages)
    return spa, store


def test_a_crawl_that_renders_finds_every_page_of_a_single_page_app(start_platform, tmp_path):
    settings, env = start_platform(host_delay_ms=0)
    spa, store = _crawl_spa(env, settings, "spa-auto", "auto", tmp_path)
    reasons = dict(store.query("SELECT url, render_reason FROM pages WHERE crawl_id = 'spa-auto'"))
    assert reasons[spa.base_url + "/"].startswith("auto: app shell")
    done = cli(env, "extract", "spa-auto")
    assert done.returncode == 0, done.stderr
    prices = store.query("SELECT json_extract(fields, '$.price')::DOUBLE FROM records WHERE crawl_id = 'spa-auto' "
                         "ORDER BY 1")
    assert [p for (p,) in prices] == [n * 10 + 0.5 for n in range(1, 6)]


def test_on_celery_a_render_worker_renders_and_a_fetch_worker_fetches(start_platform, tmp_path):
    settings, env = start_platform(executor="celery", celery_broker="redis://127.0.0.1:6379/5",
                                   celery_backend="redis://127.0.0.1:6379/6", host_delay_ms=0,
                                   lake_on_postgres=True)
    workers = {}
    try:
        for queues in ("fetch", "render"):
            log = open(tmp_path / f"{queues}.log", "wb")  # noqa: SIM115 - closed with the worker
            workers[queues] = (subprocess.Popen([*CRAWL_PLATFORM, "worker", "--queues", queues, "--concurrency", "1"],
                                                env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True), log)
        time.sleep(5)
        logs = "".join((tmp_path / f"{q}.log").read_text()[-2000:] for q in workers)
        _crawl_spa(env, settings, "spa-celery", "always", tmp_path, logs)
    finally:
        for worker, log in workers.values():
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(60)
            log.close()
    started = {q: set(re.findall(r"crawl_batch\.(\w+)\[\w+\] - STEP_START", (tmp_path / f"{q}.log").read_text()))
               for q in workers}
    assert started == {"fetch": {"fetch_shard"}, "render": {"render_shard"}}
