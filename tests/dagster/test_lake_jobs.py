"""The lake's upkeep through Dagster: the maintenance asset and job, the backup job, the schedule.

Runs on a lake of the test's own (``CRAWL_LAKE_PATH`` in the environment, as a run reads it)
that landed a handful of small batches; checks the metadata the UI shows for each run.
"""

import json
from pathlib import Path

import pytest
from dagster import materialize, serialize_value

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.schema import TABLES
from crawl_platform_dagster.assets.lake import lake_backup_job, lake_maintenance, lake_maintenance_job
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.sensors.lake import lake_maintenance_daily
from tests.conftest import CATALOG_PASSWORD
from tests.dagster.conftest import RESOURCES
from tests.unit.crawl_rows import fetch_result, land, page_html

BATCHES = 6
PAGES = 12  # above DuckLake's inlining limit: every batch writes Parquet files


@pytest.fixture
def lake_env(store_settings, store, monkeypatch):
    """The test's lake with BATCHES small batches landed, named in the environment a run reads."""
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(store_settings.lake_path))
    for b in range(BATCHES):
        urls = [f"http://jobs.test/b{b}/p{k}" for k in range(PAGES)]
        land(store, f"b{b}", [FrontierURL("jobs", u, 1) for u in urls],
             [fetch_result(u, page_html(f"page {u}", "http://jobs.test/")) for u in urls])
    return store_settings


def test_maintenance_asset_reports_files_bytes_and_snapshots_before_and_after(lake_env, store, instance,
                                                                               monkeypatch):
    monkeypatch.setenv("CRAWL_LAKE_RETENTION_DAYS", "0")
    rows = store.query("SELECT count(*) FROM pages")

    result = materialize([lake_maintenance], instance=instance, resources=RESOURCES,
                         run_config={"ops": {"lake_maintenance": {"config": {"reader_grace_minutes": 0}}}})

    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("lake_maintenance")[0].metadata.items()}
    assert meta["current_files_before"] == 4 * BATCHES  # pages, documents, links, batch_items per batch
    assert meta["current_files_after"] == 4
    assert meta["data_files_after"] == 4
    assert meta["bytes_after"] < meta["bytes_before"]
    assert meta["rows_flushed"] == 0  # nothing small enough to be inlined
    assert meta["snapshots_expired"] == meta["snapshots_before"] - 1  # every one but the latest
    assert meta["snapshots_after"] <= 3
    assert meta["files_merged"] == 4 * BATCHES
    assert meta["files_removed"] == 4 * BATCHES
    assert meta["files_awaiting_removal"] == 0
    assert meta["retention_days"] == 0
    assert store.query("SELECT count(*) FROM pages") == rows


def test_maintenance_job_keeps_merged_files_for_the_readers_grace_by_default(lake_env, instance):
    result = defs.get_job_def(lake_maintenance_job.name).execute_in_process(instance=instance)

    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("lake_maintenance")[0].metadata.items()}
    assert meta["snapshots_expired"] == 0  # seven days of retention
    assert meta["current_files_after"] == 4
    assert meta["files_removed"] == 0
    assert meta["files_awaiting_removal"] == 4 * BATCHES


def test_the_maintenance_schedule_runs_the_job_daily_and_is_on(lake_env):
    assert lake_maintenance_daily.job_name == "lake_maintenance_job"
    assert lake_maintenance_daily.cron_schedule == "0 4 * * *"
    assert lake_maintenance_daily.execution_timezone == "UTC"
    assert lake_maintenance_daily.default_status.value == "RUNNING"


def _backup_output(result) -> tuple[str, dict]:
    (event,) = [e for e in result.events_for_node("lake_backup") if e.is_successful_output]
    metadata = {k: v.value for k, v in event.step_output_data.metadata.items()}
    return result.output_for_node("lake_backup"), metadata


def test_backup_job_writes_the_manifest_and_reports_it(lake_env, store, instance, tmp_path):
    dest = tmp_path / "backup-1"

    result = lake_backup_job.execute_in_process(
        instance=instance, resources=RESOURCES,
        run_config={"ops": {"lake_backup": {"config": {"dest": str(dest)}}}})

    assert result.success
    output, meta = _backup_output(result)
    assert output == str(dest)
    manifest = json.loads((dest / "backup.json").read_text())
    assert meta["snapshot_id"] == manifest["snapshot_id"] == store.snapshot_id()
    assert meta["dest"] == str(dest)
    counts = {t: store.query(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}
    assert counts["pages"] == BATCHES * PAGES
    assert {t: meta[f"rows_{t}"] for t in TABLES} == counts
    assert meta["rows"] == sum(counts.values())
    assert meta["tables"] == manifest["tables"]


def test_backup_job_defaults_to_a_snapshot_named_folder_beside_the_lake(lake_env, store, instance):
    result = lake_backup_job.execute_in_process(instance=instance, resources=RESOURCES)

    assert result.success
    output, meta = _backup_output(result)
    folder = Path(output)
    assert folder.parent == lake_env.lake_path.parent / "backups"
    assert folder.name.startswith(f"{store.snapshot_id()}-")
    assert (folder / "backup.json").exists()
    assert meta["snapshot_id"] == store.snapshot_id()


def test_backup_job_refuses_a_destination_that_is_not_empty(lake_env, instance, tmp_path):
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "something").write_text("keep me")

    result = lake_backup_job.execute_in_process(
        instance=instance, resources=RESOURCES, raise_on_error=False,
        run_config={"ops": {"lake_backup": {"config": {"dest": str(dest)}}}})

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "exists and is not empty" in failure.step_failure_data.error.message
    assert [p.name for p in dest.iterdir()] == ["something"]


def _everything_recorded(instance, run_id: str) -> str:
    """All the instance keeps of a run, as the UI reads it: its config, tags and every event."""
    run = instance.get_run_by_id(run_id)
    return serialize_value([run.run_config, run.tags, *instance.all_logs(run_id)])


def test_a_backup_run_records_its_catalog_without_the_password(store_settings, instance, tmp_path, monkeypatch,
                                                                password_catalog):
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(store_settings.lake_path))
    monkeypatch.setenv("CRAWL_LAKE_CATALOG", password_catalog)
    monkeypatch.setenv("CRAWL_LAKE_DATA_PATH", str(tmp_path / "pg-data"))
    store = CrawlStore.from_settings(store_settings.model_copy(update={
        "lake_catalog": password_catalog, "lake_data_path": str(tmp_path / "pg-data")}))
    urls = [f"http://jobs.test/p{k}" for k in range(3)]
    land(store, "b0", [FrontierURL("jobs", u, 1) for u in urls], [fetch_result(u, page_html(u)) for u in urls])

    result = lake_backup_job.execute_in_process(
        instance=instance, resources=RESOURCES,
        run_config={"ops": {"lake_backup": {"config": {"dest": str(tmp_path / "bk")}}}})

    assert result.success
    _, meta = _backup_output(result)
    assert meta["source"] == password_catalog.replace(CATALOG_PASSWORD, "***")
    assert meta["rows_pages"] == 3
    assert CATALOG_PASSWORD not in _everything_recorded(instance, result.run_id)


def test_a_run_that_cannot_reach_the_catalog_fails_without_showing_its_password(store_settings, instance,
                                                                                 monkeypatch):
    port = free_port()
    catalog = f"postgres:dbname=crawl host=127.0.0.1 port={port} user=crawler password={CATALOG_PASSWORD}"
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(store_settings.lake_path))
    monkeypatch.setenv("CRAWL_LAKE_CATALOG", catalog)

    result = defs.get_job_def(lake_maintenance_job.name).execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.error.message.startswith(
        f"dagster._core.definitions.events.Failure: cannot open the lake postgres:dbname=crawl host=127.0.0.1 "
        f"port={port} user=crawler password=***: ")
    assert CATALOG_PASSWORD not in _everything_recorded(instance, result.run_id)
