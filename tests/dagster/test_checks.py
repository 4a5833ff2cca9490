"""Tests of the Dagster asset checks in assets/checks.py, run through Dagster for real.

A lake (crawl_platform/store/schema.sql) holds two batches, one clean and one with
broken rows. A no-op stand-in for the partitioned crawl multi-asset (same asset keys, same
DynamicPartitionsDefinition name as assets/crawl_batch.py) is materialized together with the
checks for one partition at a time, and the checks must judge only that batch's rows.

The checks read DuckDB through the real CrawlStoreResource (resources/store.py), bound under the
key the checks require.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetSelection,
    AssetSpec,
    DagsterInstance,
    Definitions,
    DynamicPartitionsDefinition,
    MaterializeResult,
    define_asset_job,
    materialize,
    multi_asset,
)

from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.assets.checks import STORE_RESOURCE_KEY, documents_quality, pages_quality, quality_checks
from crawl_platform_dagster.resources.store import CrawlStoreResource

REPO_ROOT = Path(__file__).resolve().parents[2]
GOOD, BAD = "batch-good", "batch-bad"

frontier_batches = DynamicPartitionsDefinition(name="frontier_batches")


@multi_asset(
    specs=[AssetSpec("pages"), AssetSpec("documents")],
    partitions_def=frontier_batches,
)
def crawl_batch_stand_in() -> Iterator[MaterializeResult[None]]:
    # The rows are already in DuckDB; this only gives the checks a partitioned run to ride in.
    yield MaterializeResult(asset_key="pages")
    yield MaterializeResult(asset_key="documents")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def page(
    url: str,
    batch: str,
    *,
    version: int = 1,
    status: int | None = 200,
    error: str | None = None,
    content_hash: str | None = None,
) -> tuple[object, ...]:
    return (
        url,
        "crawl-1",
        version,
        status,
        "2024-05-01 10:00:00",
        content_hash or sha(url + str(version)),
        "text/html",
        url,
        batch,
        error,
        100,
        12.5,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    path = str(tmp_path / "lake")
    pages = [
        page("https://good.test/", GOOD),
        page("https://good.test/a", GOOD, status=404),
        page("https://good.test/gone", GOOD, status=None, error="timeout"),
        page("https://bad.test/ok", BAD),
        page("https://bad.test/status", BAD, status=42),
        page("https://bad.test/hash", BAD, content_hash="xyz"),
        page("https://bad.test/version", BAD, version=0),
        page("https://bad.test/nostatus", BAD, status=None),  # no status and no error
    ]
    documents = [
        ("https://good.test/", 1, "Good", "hello"),
        ("https://good.test/a", 1, None, "not found"),
        ("https://bad.test/ok", 1, "Ok", "fine"),
        ("https://bad.test/version", 0, "V0", "version zero"),
    ]
    with CrawlStore.from_settings(Settings(lake_path=path)).write() as con:
        columns = ("url, crawl_id, version, status, fetched_at, content_hash, content_type, final_url, batch_id, "
                   "error, content_length, elapsed_ms")
        con.executemany(f"INSERT INTO pages ({columns}) VALUES ({', '.join('?' * 12)})", pages)
        con.executemany("INSERT INTO documents (url, version, title, text) VALUES (?, ?, ?, ?)", documents)
    return path


@pytest.fixture(autouse=True)
def _both_batches_are_partitions(instance: DagsterInstance) -> None:
    """The shared ephemeral ``instance`` (tests/dagster/conftest.py) knows both batches as partitions."""
    instance.add_dynamic_partitions("frontier_batches", [GOOD, BAD])


def run_batch(batch: str, db_path: str, instance: DagsterInstance) -> dict[str, AssetCheckEvaluation]:
    result = materialize(
        [crawl_batch_stand_in, *quality_checks],
        partition_key=batch,
        instance=instance,
        resources={STORE_RESOURCE_KEY: CrawlStoreResource(lake_path=db_path)},
    )
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def metadata(evaluation: AssetCheckEvaluation) -> dict[str, object]:
    return {key: value.value for key, value in evaluation.metadata.items()}


def test_quality_checks_are_the_two_non_blocking_checks() -> None:
    assert quality_checks == [pages_quality, documents_quality]
    specs = [spec for check in quality_checks for spec in check.check_specs]
    assert {(s.asset_key.to_user_string(), s.name) for s in specs} == {
        ("pages", "pages_quality"),
        ("documents", "documents_quality"),
    }
    assert not any(s.blocking for s in specs)


def test_good_batch_passes(db_path: str, instance: DagsterInstance) -> None:
    evaluations = run_batch(GOOD, db_path, instance)
    assert set(evaluations) == {"pages_quality", "documents_quality"}
    pages, documents = evaluations["pages_quality"], evaluations["documents_quality"]
    assert pages.passed
    assert metadata(pages) == {"row_count": 3, "batch_id": GOOD, "failed_expectations": 0}
    assert documents.passed
    assert metadata(documents)["row_count"] == 2


def test_bad_batch_fails_with_unexpected_counts(db_path: str, instance: DagsterInstance) -> None:
    evaluations = run_batch(BAD, db_path, instance)
    pages, documents = evaluations["pages_quality"], evaluations["documents_quality"]

    assert not pages.passed
    assert pages.severity.value == "ERROR"
    meta = metadata(pages)
    assert meta["row_count"] == 5
    assert meta["batch_id"] == BAD
    assert meta["failed_expectations"] == 4
    assert meta["expect_column_values_to_be_between[status]"] == 1
    assert meta["expect_column_values_to_match_regex[content_hash]"] == 1
    assert meta["expect_column_values_to_be_between[version]"] == 1
    assert meta["expect_column_values_to_not_be_null[status]"] == 1
    assert "'xyz'" in str(meta["failures"])

    assert not documents.passed
    meta = metadata(documents)
    assert meta["row_count"] == 2
    assert meta["failed_expectations"] == 1
    assert meta["expect_column_values_to_be_between[version]"] == 1


def test_batch_without_rows_passes(db_path: str, instance: DagsterInstance) -> None:
    instance.add_dynamic_partitions("frontier_batches", ["batch-empty"])
    evaluations = run_batch("batch-empty", db_path, instance)
    assert all(e.passed for e in evaluations.values())
    assert {metadata(e)["row_count"] for e in evaluations.values()} == {0}


def test_checks_only_run_reads_partition_tag_or_whole_table(db_path: str, instance: DagsterInstance) -> None:
    job_name = "quality_checks_only"
    defs = Definitions(
        assets=[crawl_batch_stand_in],
        asset_checks=quality_checks,
        jobs=[define_asset_job(job_name, selection=AssetSelection.checks(*quality_checks))],
        resources={STORE_RESOURCE_KEY: CrawlStoreResource(lake_path=db_path)},
    )
    job = defs.resolve_job_def(job_name)

    # A run tagged with a partition (as a partitioned run is) checks that batch only.
    tagged = job.execute_in_process(instance=instance, tags={"dagster/partition": GOOD})
    evaluations = {e.check_name: e for e in tagged.get_asset_check_evaluations()}
    assert evaluations["pages_quality"].passed
    assert metadata(evaluations["pages_quality"])["row_count"] == 3

    # Without a partition the whole table is checked, so the bad batch fails it.
    untagged = job.execute_in_process(instance=instance)
    evaluations = {e.check_name: e for e in untagged.get_asset_check_evaluations()}
    pages = evaluations["pages_quality"]
    assert not pages.passed
    assert metadata(pages)["row_count"] == 8
    assert metadata(pages)["batch_id"] == "(whole table)"
    assert metadata(evaluations["documents_quality"])["row_count"] == 4


def test_partition_range_run_checks_every_batch_in_it(db_path: str, instance: DagsterInstance) -> None:
    # A single-run backfill tags the run with a key range instead of one partition key.
    result = materialize(
        [crawl_batch_stand_in, *quality_checks],
        instance=instance,
        tags={"dagster/asset_partition_range_start": GOOD, "dagster/asset_partition_range_end": BAD},
        resources={STORE_RESOURCE_KEY: CrawlStoreResource(lake_path=db_path)},
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert metadata(evaluations["pages_quality"])["row_count"] == 8
    assert metadata(evaluations["pages_quality"])["batch_id"] == f"{GOOD}, {BAD}"
    assert not evaluations["pages_quality"].passed


def test_import_does_not_load_great_expectations() -> None:
    # Dagster imports the definitions in every process; GX must load only when a check runs.
    code = "import sys, assets.checks; assert 'great_expectations' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)
