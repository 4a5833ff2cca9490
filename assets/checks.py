"""Dagster asset checks that run the Great Expectations suites on each crawl batch.

``pages_quality`` and ``documents_quality`` target the ``pages`` and ``documents`` outputs of the
partitioned crawl multi-asset (``assets/crawl_batch.py``). Each reads only the rows of the batch
being checked from DuckDB through the store resource (``resources/store.py``, key
``crawl_store``), hands them to ``crawl_platform.quality.suites`` and reports the outcome as an
``AssetCheckResult``. This module stays thin: the rules, Great Expectations and which rows belong to a
batch (``read_pages``, ``read_documents``) live in
``crawl_platform.quality.suites``, which imports GX lazily so loading these definitions stays fast.
"""

# No `from __future__ import annotations`: Dagster compares the `context` annotation of a check
# function against the real class at decoration time, and a string annotation is rejected.
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    Field,
    MetadataValue,
    asset_check,
)

from crawl_platform.quality.suites import (
    SuiteResult,
    read_documents,
    read_pages,
    validate_documents,
    validate_pages,
)

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

# Resource key under which Definitions binds CrawlStoreResource.
STORE_RESOURCE_KEY = "crawl_store"

# Which batches a check run covers (the quality sensor fills it; empty: see batch_ids).
CHECK_CONFIG = {"batches": Field([str], is_required=False, default_value=[],
                                 description="Partition keys of the batches to check.")}

class FrameReader(Protocol):
    """What the checks need of the store resource: ``CrawlStoreResource.read_frame``."""

    def read_frame(self, read: Callable[["duckdb.DuckDBPyConnection"], "pd.DataFrame"]) -> "pd.DataFrame": ...


def batch_ids(context: AssetCheckExecutionContext) -> list[str] | None:
    """The batches (partition keys) this check run covers, or None to check the whole table.

    The quality sensor's runs name them in the check's config (``batches``). The checks are not
    partitioned themselves; in a run of the partitioned crawl asset the run carries the partition
    (tag ``dagster/partition``), and the context reads it from there. A single-run backfill
    carries a key range instead.
    """
    configured = (context.op_execution_context.op_config or {}).get("batches") or []
    if configured:
        return list(configured)
    if context.has_partition_key:
        return [context.partition_key]
    if context.has_partition_key_range:
        return list(context.partition_keys)
    return None


def check_result(result: SuiteResult, batches: list[str] | None) -> AssetCheckResult:
    """Turn a suite result into a check result: row count plus one entry per failed rule."""
    metadata: dict[str, MetadataValue[Any]] = {
        "row_count": MetadataValue.int(result.row_count),
        "batch_id": MetadataValue.text(", ".join(batches) if batches is not None else "(whole table)"),
        "failed_expectations": MetadataValue.int(len(result.failed)),
    }
    # One integer per failed rule so the UI can plot it; passing rules are left out.
    for outcome in result.failed:
        metadata[outcome.label] = MetadataValue.int(outcome.unexpected_count)
    if result.failed:
        metadata["failures"] = MetadataValue.text("\n".join(o.details for o in result.failed))
    return AssetCheckResult(
        passed=result.success,
        severity=AssetCheckSeverity.ERROR,
        metadata=metadata,
        description=f"GX suite {result.suite!r}: "
        + ("all expectations met" if result.success else f"{len(result.failed)} expectation(s) failed"),
    )


def _run(
    context: AssetCheckExecutionContext,
    read: Callable[["duckdb.DuckDBPyConnection", list[str] | None], "pd.DataFrame"],
    validate: Callable[["pd.DataFrame"], SuiteResult],
) -> AssetCheckResult:
    store: FrameReader = getattr(context.resources, STORE_RESOURCE_KEY)
    batches = batch_ids(context)
    df = store.read_frame(lambda con: read(con, batches))
    result = validate(df)
    for outcome in result.failed:
        context.log.warning(outcome.details)
    return check_result(result, batches)


@asset_check(
    asset=AssetKey("pages"),
    name="pages_quality",
    description="GX suite on this batch's pages rows: url/hash/fetched_at/batch_id present, "
    "(url, version) unique, version >= 1, status 100..599 or null only with an error, "
    "content_hash is sha256 hex.",
    blocking=False,
    required_resource_keys={STORE_RESOURCE_KEY},
    config_schema=CHECK_CONFIG,
)
def pages_quality(context: AssetCheckExecutionContext) -> AssetCheckResult:
    """Validate the pages rows of the checked batch (the whole table outside a partition)."""
    return _run(context, read_pages, validate_pages)


@asset_check(
    asset=AssetKey("documents"),
    name="documents_quality",
    description="GX suite on this batch's documents rows: url and text present, "
    "(url, version) unique, version >= 1.",
    blocking=False,
    required_resource_keys={STORE_RESOURCE_KEY},
    config_schema=CHECK_CONFIG,
)
def documents_quality(context: AssetCheckExecutionContext) -> AssetCheckResult:
    """Validate the documents of the checked batch's pages (the whole table outside a partition)."""
    return _run(context, read_documents, validate_documents)


quality_checks: list[AssetChecksDefinition] = [pages_quality, documents_quality]
