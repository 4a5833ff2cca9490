"""The ``near_duplicates`` asset: groups of each crawl's pages that are exact or near copies of each other.

Downstream of ``documents`` (whose ``simhash`` column the parser fills on the crawl path) and not
partitioned by batch: a group can join pages from any batches of a crawl, so a materialisation
regroups whole crawls, every registered crawl by default or those named in its config, and
replaces their rows in the lake table ``near_duplicates`` in one snapshot. The work is
:func:`crawl_platform.dedup.near_duplicates.find_near_duplicates`; this module reads config,
calls it and reports the groups as metadata the UI plots. It writes the lake, so it takes the
``crawl_duckdb_writer`` pool like the landing steps. Materialise it from the UI (or a job of
your own) when a crawl has landed; it is cheap (one read of the crawls' latest documents).
"""

from dagster import AssetExecutionContext, Config, Failure, MaterializeResult, asset
from pydantic import Field

from crawl_platform.dedup.near_duplicates import DEFAULT_MAX_DISTANCE, MAX_DISTANCE_LIMIT, find_near_duplicates
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class NearDuplicatesConfig(Config):
    crawl_ids: list[str] = Field(default_factory=list, description="Crawls to regroup; empty for every crawl.")
    max_distance: int = Field(DEFAULT_MAX_DISTANCE, ge=0, le=MAX_DISTANCE_LIMIT,
                              description="Most SimHash bits (of 64) two near copies differ in.")


@asset(deps=["documents"], group_name="content", code_version="1", pool=DUCKDB_WRITER_POOL, kinds={"ducklake"},
       description="Groups of a crawl's latest pages that are copies: the same content hash (exact) or "
       "SimHashes of their main text within 3 bits (near).")
def near_duplicates(context: AssetExecutionContext, config: NearDuplicatesConfig,
                    crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    try:
        report = find_near_duplicates(crawl.store(), config.crawl_ids, config.max_distance)
    except (ValueError, StoreBusyError, StoreUnavailableError) as err:  # ValueError: an unknown crawl id
        raise Failure(description=str(err)) from None
    context.log.info(f"{report.groups} groups ({report.pages_in_groups} pages) among {report.documents} "
                     f"documents of {len(report.crawls)} crawls in {report.seconds:.2f}s")
    return MaterializeResult(metadata={
        "groups": report.groups,
        "exact_groups": report.exact_groups,
        "near_groups": report.groups - report.exact_groups,
        "largest_group": report.largest_group,
        "pages_in_groups": report.pages_in_groups,
        "documents": report.documents,
        "crawls": len(report.crawls),
        "max_distance": config.max_distance,
        "snapshot_id": report.snapshot_id,
        "seconds": round(report.seconds, 3),
    })
