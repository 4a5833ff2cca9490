"""The ``documents_markdown`` asset: each HTML page version as Markdown with its published date.

Downstream of ``pages`` and ``documents``, off the crawl's critical path: trafilatura and htmldate
cost more CPU a page than the crawl itself, so the batch runs only land pages, and this asset
extracts from the raw archive afterwards (:func:`crawl_platform.markdown.documents.land_markdown`,
which never fetches).
It is incremental and not partitioned: each materialisation extracts the versions that have no
row yet, of every crawl or of those named in its config. Its automation condition
(:data:`MARKDOWN_AUTOMATION`) requests it whenever a batch has materialised ``pages`` or
``documents`` since it was last requested, unless a run of it is under way, and the sensor
``content_automation_sensor`` (``sensors/content.py``) evaluates that every 30 s. It takes no
writer pool: the extraction runs outside any lock and only the final insert takes turns on the
lake's write lock, so landings never wait for it.
"""

from dagster import AssetExecutionContext, AutomationCondition, Config, Failure, MaterializeResult, asset
from pydantic import Field

from crawl_platform.archive.reader import ArchiveReadError
from crawl_platform.markdown.documents import land_markdown
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource

# Like AutomationCondition.eager(), without its waits for every batch partition to be present and
# none in progress: during a crawl some batch always is, and eager() would hold off until the end.
MARKDOWN_AUTOMATION = ((AutomationCondition.newly_missing() | AutomationCondition.any_deps_updated())
                       .since_last_handled() & ~AutomationCondition.in_progress()).with_label(
                           "a batch landed since the last request, none of its own runs in progress")


class MarkdownConfig(Config):
    crawl_ids: list[str] = Field(default_factory=list, description="Crawls to extract; empty for every crawl.")


@asset(deps=["pages", "documents"], group_name="content", code_version="1", kinds={"ducklake"},
       automation_condition=MARKDOWN_AUTOMATION,
       description="Each HTML page version as Markdown with its published date (trafilatura, htmldate), "
       "extracted from the raw archive as batches land.")
def documents_markdown(context: AssetExecutionContext, config: MarkdownConfig,
                       crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    try:
        report = land_markdown(crawl.store(), config.crawl_ids)
    except (ValueError, ArchiveReadError, StoreBusyError, StoreUnavailableError) as err:
        raise Failure(description=str(err)) from None
    rate = report.extracted / report.seconds if report.seconds else 0.0
    context.log.info(f"{report.extracted} versions extracted ({report.errors} without Markdown) in "
                     f"{report.seconds:.1f}s, {rate:.0f} pages/s")
    return MaterializeResult(metadata={
        "extracted": report.extracted,
        "with_markdown": report.with_markdown,
        "with_published_date": report.with_date,
        "errors": report.errors,
        "unarchived": report.unarchived,
        "crawls": len(report.crawls),
        "pages_per_s": round(rate, 1),
        "seconds": round(report.seconds, 2),
    })
