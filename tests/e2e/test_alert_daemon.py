"""Alerts and progress observations through the real Dagster daemon: a crawl whose batch runs
fail (the run workers cannot write their handoff folder) sends a run-failure alert per failed run
and one stall alert to a webhook on loopback, and crawl_progress is observed with its backlog."""

import time

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from crawl_platform.cli.demo_site import DemoSite
from tests.e2e.conftest import cli

pytestmark = pytest.mark.e2e(seconds=150)


def test_failing_batch_runs_alert_each_failure_and_the_stall_once(start_platform, webhook, tmp_path):
    blocked = tmp_path / "handoff-is-a-file"
    blocked.write_text("not a folder")
    settings, env = start_platform(host_delay_ms=0, handoff_dir=blocked, alert_webhook_url=webhook.url,
                                   stall_minutes=0.25, ui_url="http://ui.test:3000", monitor_interval_s=15)
    with DemoSite(n_pages=20, seed=3).serve() as server:
        result = cli(env, "crawl", server.base_url + "/", "--crawl-id", "e2e-alert")
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            titles = [t.splitlines()[0] for t in webhook.texts()]
            if "[crawl-platform] Crawl stalled: e2e-alert" in titles and any("Run failed" in t for t in titles):
                break
            time.sleep(2)
    texts = webhook.texts()
    titles = [t.splitlines()[0] for t in texts]
    assert titles.count("[crawl-platform] Crawl stalled: e2e-alert") == 1, titles
    failures = [t for t in texts if t.startswith("[crawl-platform] Run failed: crawl_batch_job (crawl e2e-alert)")]
    assert failures, titles
    lines = failures[0].splitlines()
    assert lines[1] == "Crawl: e2e-alert"
    assert lines[2].startswith("What broke: step crawl_batch.plan_batch: ")
    assert lines[3].startswith("Batch: e0.p")
    assert lines[4].startswith("Retry: attempt ")
    assert lines[5].startswith("Run: http://ui.test:3000/runs/")
    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        failed = instance.get_runs(RunsFilter(job_name="crawl_batch_job", statuses=[DagsterRunStatus.FAILURE]))
        assert {line.rsplit("/", 1)[1] for t in failures for line in t.splitlines() if line.startswith("Run: ")} \
            <= {r.run_id for r in failed}
        observations = instance.fetch_observations(AssetKey("crawl_progress"), limit=10).records
        assert observations, "no crawl_progress observation recorded"
        figures = {k: v.value for k, v in observations[0].asset_observation.metadata.items()}
        assert figures["e2e-alert/pending"] >= 1
        assert figures["e2e-alert/fetched"] == 0
        assert "frontier_lag" in figures
