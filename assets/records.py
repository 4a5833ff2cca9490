"""The ``records`` asset: a crawl's extraction rules applied to its archived pages, one partition per crawl.

Partitioned by crawl id (dynamic partitions ``extract_crawls``, added by ``records_sensor`` for
every crawl that carries rules), so re-materialising a crawl's records is picking its partition
in the UI. A run extracts what its crawl's records lack: new pages as batches land, every page
after the rules changed (``crawl-platform extract CRAWL --rules``), all from the raw archive and
never the network (:func:`crawl_platform.extract.run.extract_crawl`). Two asset checks run the
Great Expectations suites of :mod:`crawl_platform.extract.checks` on the partition's records:
``records_null_rate`` (required fields) and ``records_type_errors`` (typed fields), with the
thresholds of the crawl's rules and each field's rate in their metadata.
"""

# No `from __future__ import annotations`: Dagster compares the `context` annotation of a check
# function against the real class at decoration time, and a string annotation is rejected.
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
    asset_check,
    define_asset_job,
    in_process_executor,
)

from crawl_platform.extract.checks import CheckKind, check_records
from crawl_platform.extract.records import view_name
from crawl_platform.extract.run import extract_crawl
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL
from crawl_platform_dagster.resources.store import CrawlStoreResource

EXTRACT_PARTITIONS = "extract_crawls"
extract_crawls = DynamicPartitionsDefinition(name=EXTRACT_PARTITIONS)


@asset(
    group_name="extract", code_version="1", pool=DUCKDB_WRITER_POOL, partitions_def=extract_crawls,
    deps=[AssetKey("pages")],
    description="Records extracted from a crawl's archived pages by its extraction rules (table `records`, "
    "typed view records_<crawl>); one partition per crawl.",
)
def records(context: AssetExecutionContext, crawl_store: CrawlStoreResource) -> MaterializeResult[None]:
    crawl_id = context.partition_key
    report = extract_crawl(crawl_store.store(), crawl_id)
    context.log.info(f"crawl {crawl_id}: {report.pages} pages, {report.records} records, "
                     f"{report.page_errors} page errors (rules {report.rules_digest})")
    for example in report.examples:
        context.log.warning(f"page error: {example}")
    if report.unbounded:
        context.log.warning(report.unbounded)
    return MaterializeResult(metadata={
        "pages_extracted": report.pages,
        "records": report.records,
        "page_errors": report.page_errors,
        "pages_replaced": report.replaced_pages,
        "field_errors": MetadataValue.json(dict(sorted(report.field_errors.items()))),
        "rules_digest": report.rules_digest,
        "view": view_name(crawl_id),
        "snapshot_id": report.snapshot_id if report.snapshot_id is not None else -1,
    })


def _result(context: AssetCheckExecutionContext, store: CrawlStoreResource, kind: CheckKind) -> AssetCheckResult:
    check = check_records(store.store(), context.partition_key, kind)
    metadata: dict[str, Any] = {
        "crawl_id": check.crawl_id, "rules_digest": check.rules_digest, "records": check.records,
        "pages": check.pages, "page_errors": check.page_errors,
        "threshold": MetadataValue.float(check.rates[0].threshold if check.rates else 0.0),
    }
    for rate in check.rates:
        metadata[f"{kind}[{rate.field}]"] = MetadataValue.float(rate.rate)
    if not check.passed:
        context.log.warning(check.summary)
    return AssetCheckResult(passed=check.passed, severity=AssetCheckSeverity.ERROR, metadata=metadata,
                            description=check.summary)


@asset_check(asset=records, name="records_null_rate", blocking=False,
             description="GX: each required field is NULL in at most the rules' checks.max_null_rate of the "
             "crawl's records (and the crawl's pages gave records at all).")
def records_null_rate(context: AssetCheckExecutionContext, crawl_store: CrawlStoreResource) -> AssetCheckResult:
    return _result(context, crawl_store, "null_rate")


@asset_check(asset=records, name="records_type_errors", blocking=False,
             description="GX: each int, float, bool or date field fails its type in at most the rules' "
             "checks.max_type_error_rate of the crawl's records.")
def records_type_errors(context: AssetCheckExecutionContext, crawl_store: CrawlStoreResource) -> AssetCheckResult:
    return _result(context, crawl_store, "type_errors")


records_checks = [records_null_rate, records_type_errors]

records_job = define_asset_job(
    "records_job",
    selection=[records.key],
    partitions_def=extract_crawls,
    executor_def=in_process_executor,
    description="Extract one crawl's records from the archive (its partition) and check them.",
)
