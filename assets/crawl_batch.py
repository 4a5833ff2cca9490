"""Assets of one crawl batch: fetch-parse-land into ``pages``/``documents``/``links``, then grow ``frontier``.

Each frontier batch is a dynamic partition whose key names the Kafka offset range it covers
(see :mod:`crawl_platform.batching`), so materialising a partition again fetches exactly that
batch. The work is the engine's (:class:`crawl_platform.crawl.BatchCrawler`); this module only
maps it onto Dagster assets and reports its figures as metadata.
"""


from collections.abc import Iterator

from dagster import (
    AssetExecutionContext,
    AssetSpec,
    Backoff,
    Config,
    DynamicPartitionsDefinition,
    MaterializeResult,
    RetryPolicy,
    asset,
    multi_asset,
)

from crawl_platform.batching import parse_batch_key
from crawl_platform.bus import BatchLostError
from resources.crawl import CrawlSettingsResource

CODE_VERSION = "1"
frontier_batches = DynamicPartitionsDefinition(name="frontier_batches")
batch_retry = RetryPolicy(max_retries=3, delay=2, backoff=Backoff.EXPONENTIAL)


class BatchConfig(Config):  # type: ignore[misc]
    refetch_done: bool = True
    """Fetch URLs the crawl already finished. Sensor runs set False (a duplicate delivery is
    skipped); a manual re-materialisation keeps True and refetches the whole batch."""


@multi_asset(
    specs=[
        AssetSpec("pages", deps=["crawls"], code_version=CODE_VERSION,
                  description="Every fetched version of every URL (new version only when content changes)."),
        AssetSpec("documents", deps=["crawls"], code_version=CODE_VERSION,
                  description="Title and text of each HTML page version."),
        AssetSpec("links", deps=["crawls"], code_version=CODE_VERSION,
                  description="Outgoing links of each page version, canonicalised."),
    ],
    partitions_def=frontier_batches,
    retry_policy=batch_retry,
    group_name="crawl",
)
def crawl_batch(
    context: AssetExecutionContext, config: BatchConfig, crawl: CrawlSettingsResource
) -> Iterator[MaterializeResult]:
    """Fetch, parse and land one frontier batch in one DuckDB transaction."""
    _epoch, offsets = parse_batch_key(context.partition_key)
    try:
        report = crawl.batch_crawler().fetch_and_land(context.partition_key, offsets, config.refetch_done)
    except BatchLostError as err:
        # Retrying cannot bring the messages back; the frontier sensor has asked for every pending
        # URL to be re-published from DuckDB, so skipping loses nothing.
        context.log.warning(str(err))
        for key in ("pages", "documents", "links"):
            yield MaterializeResult(asset_key=key, metadata={"lost_batch": True})
        return
    context.log.info(f"batch {context.partition_key}: {report}")
    total = sum(report.seconds.values())
    yield MaterializeResult(
        asset_key="pages",
        metadata={
            "messages": report.messages,
            "pages_fetched": report.fetched,
            "errors": report.failed,
            "disallowed_by_robots": report.disallowed,
            "skipped_duplicates": report.skipped,
            "dead_letters": report.dead_letters,
            "bytes": report.bytes,
            "new_versions": report.new_versions,
            "fetch_seconds": round(report.seconds.get("fetch", 0.0), 3),
            "parse_seconds": round(report.seconds.get("parse", 0.0), 3),
            "land_seconds": round(report.seconds.get("land", 0.0), 3),
            "pages_per_second": round((report.fetched + report.failed) / total, 1) if total else 0.0,
        },
    )
    yield MaterializeResult(asset_key="documents", metadata={"new_versions": report.new_versions})
    yield MaterializeResult(asset_key="links", metadata={"links": report.links})


@asset(
    deps=["pages", "links"],
    partitions_def=frontier_batches,
    retry_policy=batch_retry,
    code_version=CODE_VERSION,
    group_name="crawl",
    description="Every URL each crawl knows and its state; new in-scope links are published to Kafka.",
)
def frontier(context: AssetExecutionContext, crawl: CrawlSettingsResource) -> MaterializeResult:
    """Admit the batch's new in-scope links, close its items, publish to the frontier topic."""
    crawler = crawl.batch_crawler()
    growth = crawler.expand(context.partition_key)
    if growth.unconfirmed:
        # The rows stay 'discovered' in DuckDB; failing makes the retry policy publish them again.
        raise RuntimeError(f"the broker did not confirm {growth.unconfirmed} of {growth.admitted} new URLs")
    return MaterializeResult(metadata={
        "links_in_scope": growth.discovered,
        "new_urls": growth.admitted,
        "published": growth.published,
    })
