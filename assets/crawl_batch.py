"""Assets of one crawl batch: fetch-parse-land into ``pages``/``documents``/``links``, then grow ``frontier``.

Each frontier batch is a dynamic partition whose key names the Kafka offset ranges it covers
(see :mod:`crawl_platform.bus.offsets`), so materialising a partition again fetches exactly that
batch. A batch run fans out:

    plan_batch ──> fetch_shard ──> render_shard (N of each, whole hosts each) ──> land_batch
               ──> pages/documents/links ──> frontier

``fetch_shard`` steps run in parallel on a distributed executor. ``render_shard`` gets a shard
only when one of its crawls renders (:mod:`crawl_platform.render`), renders the pages that need
it and hands ``land_batch`` only what rendering changed, which landing applies to the shard; on
Celery it runs on a queue of its own (``<CRAWL_CELERY_QUEUE>-render``), so workers
started for it (``crawl-platform worker --queues render``) keep browsers off the fetch workers.
``land_batch`` and ``frontier``
are the only steps that write the lake, and they run in the ``crawl_duckdb_writer`` concurrency
pool (see ``dagster.yaml``) and take turns on the lake's write lock. The work is the
engine's (:mod:`crawl_platform.pipeline.batch`: reader, shard fetcher, lander, expand), including
what a retried or lost batch does; this module maps it onto Dagster steps and reports its figures
as metadata.

A run the frontier sensor started then goes on, in its ``frontier`` step, to its partitions' next
batches (:mod:`crawl_platform.pipeline.continuation`, up to ``CRAWL_RUN_CONTINUE_S``): the
coordinator cuts each and adds it as a partition of its own, and the step reads, fetches, lands and
expands it and materialises it as such (``pages``, ``documents``, ``links``, ``frontier``, with the
same metadata), so a next batch costs no sensor pass and no run start.
"""

from collections.abc import Iterator, Sequence

from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetMaterialization,
    AssetOut,
    Backoff,
    Config,
    DagsterInstance,
    DynamicOut,
    DynamicOutput,
    DynamicPartitionsDefinition,
    Failure,
    In,
    MaterializeResult,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    RetryPolicy,
    asset,
    graph_multi_asset,
    in_process_executor,
    op,
)

from crawl_platform.bus.offsets import parse_batch_key
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.pipeline.batch import HandoffLostError, expand_batch
from crawl_platform.pipeline.continuation import ContinuedBatch, continue_batches
from crawl_platform.pipeline.reader import BatchReport, PreparedBatch
from crawl_platform.pipeline.shard import ShardResult
from crawl_platform.render.results import ShardRendering
from crawl_platform.store.hosts import HostRecord
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL, render_step_tags
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.handoff import HANDOFF_IO_MANAGER_KEY, discard_runs, handoff_folder

CODE_VERSION = "2"
FRONTIER_BATCHES = "frontier_batches"
frontier_batches = DynamicPartitionsDefinition(name=FRONTIER_BATCHES)
batch_retry = RetryPolicy(max_retries=3, delay=2, backoff=Backoff.EXPONENTIAL)

Shard = tuple[list[FetchRequest], list[HostRecord], int]  # its requests, their hosts, its byte budget


class BatchConfig(Config):
    refetch_done: bool = True
    """Fetch URLs the crawl already finished. Sensor runs set False (a duplicate delivery is
    skipped); a manual re-materialisation keeps True and refetches the whole batch."""
    shards: int = 1
    """Fetch steps to fan out into (the sensor sets CRAWL_FETCH_SHARDS or its executor default)."""
    min_shard_urls: int = 25
    """No more shards than give this many URLs each: a step per handful of URLs costs more than it saves."""


# Executors that run every step in the run's own process: the in-process one, and what
# materialize() and execute_in_process() use.
_IN_PROCESS_EXECUTORS = frozenset({in_process_executor.name, "execute_in_process_executor"})


def _steps_share_the_process(context: OpExecutionContext | AssetExecutionContext) -> bool:
    """Whether the run's steps run in its own process, so that they can share its parse workers;
    Celery runs each step in a worker process that outlives it."""
    return context.job_def.executor_def.name in _IN_PROCESS_EXECUTORS


@op(
    ins={"crawls": In(Nothing)},
    out={"prepared": Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
         "shards": DynamicOut(io_manager_key=HANDOFF_IO_MANAGER_KEY)},
    retry_policy=batch_retry,
    description="Read the batch's offset ranges from Kafka, dead-letter bad messages, split by host.",
)
def plan_batch(context: OpExecutionContext, config: BatchConfig,
               crawl: CrawlSettingsResource) -> Iterator[Output[PreparedBatch] | DynamicOutput[Shard]]:
    _epoch, ranges = parse_batch_key(context.partition_key)
    if _steps_share_the_process(context):  # they import while this step reads the batch
        crawl.start_parse_workers(sum(r.end - r.start for r in ranges))
    prepared = crawl.batch_reader().prepare(context.partition_key, ranges, config.refetch_done)
    if prepared.lost:
        context.log.warning(prepared.lost)
    shards = prepared.shards(config.shards, config.min_shard_urls)
    context.log.info(f"batch {context.partition_key}: {prepared.report.messages} messages, "
                     f"{len(prepared.requests)} to fetch in {len(shards)} shard(s)")
    yield Output(prepared, "prepared")
    # At least one shard, so the landing step always runs (an empty batch still lands as empty).
    # The shards share the batch's byte budget: the landing step holds all their bodies.
    budget = max(1, crawl.settings().batch_max_bytes // max(1, len(shards)))
    for index, requests in enumerate(shards or [[]]):
        yield DynamicOutput((requests, prepared.hosts_of(requests), budget), mapping_key=f"s{index}",
                            output_name="shards")


@op(
    out={"shard": Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
         "to_render": Out(io_manager_key=HANDOFF_IO_MANAGER_KEY)},
    retry_policy=batch_retry,
    description="Fetch and parse one shard of whole hosts (politeness per host holds inside it).",
)
def fetch_shard(context: OpExecutionContext, crawl: CrawlSettingsResource,
                shard: Shard | None) -> Iterator[Output[ShardResult | None]]:
    if shard is None:  # the handoff is gone because the batch already landed (see land_batch)
        yield Output(None, "shard")
        yield Output(None, "to_render")
        return
    requests, hosts, budget = shard
    fetcher = crawl.shard_fetcher(shared_workers=_steps_share_the_process(context), pages=len(requests))
    try:
        result = fetcher.fetch(requests, hosts, context.partition_key, context.get_mapping_key() or "s0", budget)
    finally:
        fetcher.close()
    if fetcher.fallback:
        context.log.warning(fetcher.fallback)
    context.log.info(f"shard of {len(requests)} URLs: fetch {result.seconds['fetch']:.2f} s, "
                     f"parse {result.seconds['parse']:.2f} s (the wait for the parse workers, if any)")
    yield Output(result, "shard")
    # The render step gets the shard only when one of its crawls renders: otherwise a None, so a
    # plain crawl's render step loads and writes no page again.
    yield Output(result if result.render is not None else None, "to_render")


@op(
    out=Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
    retry_policy=batch_retry,
    tags=render_step_tags(),
    description="Render the shard's pages that need a browser (crawls with --render); nothing for others.",
)
def render_shard(context: OpExecutionContext, crawl: CrawlSettingsResource,
                 shard: ShardResult | None) -> ShardRendering | None:
    if shard is None or shard.render is None:  # nothing of it renders: no browser, no Playwright
        return None
    renderer = crawl.shard_renderer()
    try:
        result = renderer.render_pages(shard, context.partition_key, context.get_mapping_key() or "s0")
    finally:
        renderer.close()
    if result is not None:
        rendered = sum(1 for r in result.rendering.values() if r.rendered)
        failed = sum(1 for r in result.rendering.values() if r.error)
        context.log.info(f"shard: {rendered} pages rendered, {failed} failed, of {len(result.rendering)} considered, "
                         f"in {result.seconds:.2f} s")
    return result


@op(
    ins={"prepared": In(), "shards": In(), "renderings": In()},
    out={"pages": Out(Nothing), "documents": Out(Nothing), "links": Out(Nothing)},
    pool=DUCKDB_WRITER_POOL,
    retry_policy=batch_retry,
    description="Land the batch in one lake transaction, one snapshot (pool crawl_duckdb_writer).",
)
def land_batch(context: OpExecutionContext, crawl: CrawlSettingsResource, prepared: PreparedBatch | None,
               shards: list[ShardResult | None], renderings: list[ShardRendering | None]) -> Iterator[Output[None]]:
    try:
        outcome = crawl.batch_lander().land_or_resume(context.partition_key, prepared, shards, renderings)
    except HandoffLostError as err:
        raise Failure(str(err)) from None
    if outcome.report is None:
        if outcome.already_landed:
            context.log.warning(f"batch {context.partition_key} had already landed; nothing to do")
        flag = "already_landed" if outcome.already_landed else "lost_batch"
        for key in ("pages", "documents", "links"):
            yield Output(None, key, metadata={flag: True})
        return
    report = outcome.report
    context.log.info(f"batch {context.partition_key}: {report}")
    yield Output(None, "pages", metadata=_pages_metadata(report, len(shards)))
    yield Output(None, "documents", metadata={"new_versions": report.new_versions})
    yield Output(None, "links", metadata={"links": report.links})


def _pages_metadata(report: BatchReport, shards: int) -> dict[str, int | float | None]:
    """The ``pages`` materialisation's metadata of a landed batch."""
    total = sum(report.seconds.values())
    return {
        "messages": report.messages,
        "shards": shards,
        "pages_fetched": report.fetched,
        "errors": report.failed,
        "disallowed_by_robots": report.disallowed,
        "skipped_duplicates": report.skipped,
        "dead_letters": report.dead_letters,
        "deferred": report.deferred,
        "postponed_over_budget": report.postponed,
        "bytes": report.bytes,
        "new_versions": report.new_versions,
        "unchanged_not_parsed": report.unchanged,
        "fetch_seconds": round(report.seconds.get("fetch", 0.0), 3),
        "parse_seconds": round(report.seconds.get("parse", 0.0), 3),
        "archive_seconds": round(report.seconds.get("archive", 0.0), 3),
        "render_seconds": round(report.seconds.get("render", 0.0), 3),
        "pages_rendered": report.rendered,
        "land_seconds": round(report.seconds.get("land", 0.0), 3),
        "pages_landed_early": report.streamed,
        "pages_per_second": round((report.fetched + report.failed) / total, 1) if total else 0.0,
        # The lake as of this batch: SELECT ... FROM pages AT (VERSION => snapshot_id).
        "snapshot_id": report.snapshot_id,
    }


@graph_multi_asset(
    outs={
        "pages": AssetOut(dagster_type=Nothing, code_version=CODE_VERSION,
                          description="Every fetched version of every URL (new version only when content changes)."),
        "documents": AssetOut(dagster_type=Nothing, code_version=CODE_VERSION,
                              description="Title, text and main text (language, SimHash) of each HTML page version."),
        "links": AssetOut(dagster_type=Nothing, code_version=CODE_VERSION,
                          description="Outgoing links of each page version, canonicalised."),
    },
    ins={"crawls": AssetIn(dagster_type=Nothing)},
    partitions_def=frontier_batches,
    group_name="crawl",
)
def crawl_batch(crawls: None) -> dict[str, object]:
    """Fetch and parse one frontier batch in host shards, then land it in one DuckDB transaction."""
    prepared, shards = plan_batch(crawls)
    fetched, to_render = shards.map(fetch_shard)
    pages, documents, links = land_batch(prepared, fetched.collect(), to_render.map(render_shard).collect())
    return {"pages": pages, "documents": documents, "links": links}


class FrontierConfig(Config):
    continue_seconds: float = 0.0
    """Go on to the batch's partitions' next batches for up to this many seconds, each landed as
    its own partition (the sensor sets CRAWL_RUN_CONTINUE_S; a manual materialisation does not go
    on, since the sensor keeps cutting partitions that no sensor-started run holds)."""


class _InstancePartitions:
    """The partitions of ``frontier_batches`` on the run's instance (the coordinator's
    :class:`~crawl_platform.pipeline.coordinator.PartitionRegistry`)."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance

    def add_partitions(self, keys: Sequence[str]) -> None:
        self.instance.add_dynamic_partitions(FRONTIER_BATCHES, list(keys))


@asset(
    deps=["pages", "links"],
    partitions_def=frontier_batches,
    retry_policy=batch_retry,
    code_version=CODE_VERSION,
    group_name="crawl",
    pool=DUCKDB_WRITER_POOL,
    description="Every URL each crawl knows and its state: the batch's new in-scope links are admitted and "
                "published to Kafka, and its page events to the pages topic. In a sensor-started run this step "
                "then reads, fetches, lands and expands its partitions' next batches (CRAWL_RUN_CONTINUE_S), "
                "each materialised as its own partition.",
)
def frontier(context: AssetExecutionContext, config: FrontierConfig,
             crawl: CrawlSettingsResource) -> Iterator[AssetMaterialization | MaterializeResult[None]]:
    """Admit the batch's new in-scope links, close its items, publish to the frontier topic; then
    read, fetch, land and expand the next batches of its partitions (see
    :mod:`crawl_platform.pipeline.continuation`)."""
    run = context.dagster_run
    try:
        # Raises when the broker did not confirm every new URL: they stay 'discovered' in the
        # store and are published again (the retry, or the next batch's republish of stale URLs).
        frontier_ = crawl.frontier()
        growth = expand_batch(frontier_, context.partition_key, crawl.page_events(frontier_))
    finally:
        # The batch landed and Dagster recorded it: its handoff between steps is no longer needed.
        discard_runs(handoff_folder(crawl.settings()),
                     [r for r in (run.run_id, run.parent_run_id, run.root_run_id) if r])
    continued = 0
    if config.continue_seconds > 0:
        continuation = crawl.continuation(shared_workers=_steps_share_the_process(context))
        try:
            for done in continue_batches(continuation, context.partition_key, config.continue_seconds,
                                         _InstancePartitions(context.instance)):
                continued += 1
                yield from _continued_materializations(context, done)
        finally:
            continuation.close()
    yield MaterializeResult(metadata={
        "snapshot_id": crawl.store().snapshot_id(),
        "links_in_scope": growth.discovered,
        "new_urls": growth.admitted,
        "published": growth.published,
        "batches_continued": continued,
    })


def _continued_materializations(context: AssetExecutionContext,
                                done: ContinuedBatch) -> Iterator[AssetMaterialization]:
    """A next batch the run went on to, materialised as its own partition of the batch assets."""
    key, report = done.batch.key, done.report
    if done.lost:
        context.log.warning(f"batch {key}: {done.lost}")
        return
    context.log.info(f"batch {key} (went on from {context.partition_key}): {report}")
    yield AssetMaterialization("pages", partition=key, metadata=_pages_metadata(report, 1))
    yield AssetMaterialization("documents", partition=key, metadata={"new_versions": report.new_versions})
    yield AssetMaterialization("links", partition=key, metadata={"links": report.links})
    yield AssetMaterialization("frontier", partition=key, metadata={
        "snapshot_id": report.snapshot_id,
        "links_in_scope": done.growth.discovered,
        "new_urls": done.growth.admitted,
        "published": done.growth.published,
        "went_on_from": context.partition_key,
    })
