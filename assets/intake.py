"""The ``crawls`` asset and the Launchpad job that submits a crawl.

Seeds arrive on the Kafka seeds topic (from the CLI, the Launchpad job below, or any producer).
The seeds sensor registers each crawl of new offsets and puts its seeds on the frontier in its own
evaluation, reporting the ``crawls`` materialisation itself (no run to start, so the first batch
is cut at the frontier sensor's next pass); a crawl that reads sitemaps, or a very large
submission, gets a run of ``crawls`` instead, which does the same. Materialising ``crawls`` by
hand with ``requeue_pending`` re-publishes every URL that is known but not fetched, for a broker
that lost its data.
"""

from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    Config,
    Failure,
    MaterializeResult,
    OpExecutionContext,
    asset,
    job,
    op,
)
from pydantic import Field

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.extract.rules import parse_rules
from crawl_platform.pipeline.intake import IntakeReport
from crawl_platform.pipeline.submission import (
    build_crawl_request,
    registration_conflict,
    render_refusal,
    submit_crawl,
)
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class IntakeConfig(Config):
    seed_ranges: list[str] = Field(default_factory=list, description="Seeds-topic offset ranges, e.g. p3-0-2.")
    requeue_pending: bool = Field(False, description="Re-publish every known URL not fetched yet.")


# No writer pool (crawl_duckdb_writer): most of this step is network work (sitemaps over HTTP, publishing
# every pending URL), and a pool slot held through it would stall every other run's landing. Its lake
# writes are short admission transactions, each taking the lake's write lock on its own (as the CLI's
# own registration does), and never around a network call.
@asset(group_name="crawl", code_version="1",
       description="Registered crawls (seeds, scope, limits); seeds enter the frontier here.")
def crawls(context: AssetExecutionContext, config: IntakeConfig,
           crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    intake = crawl.seed_intake()
    report = IntakeReport()
    for key in config.seed_ranges:
        report.add(intake.register(OffsetRange.parse(key)))
    requeued = 0
    if config.requeue_pending:
        requeued = crawl.frontier().requeue_all_pending().published
    context.log.info(f"registered {report.crawls}, {report.admitted} seeds admitted, {requeued} URLs re-published")
    for note in report.notes:
        context.log.warning(note)
    return MaterializeResult(metadata=intake_metadata(report, requeued))


def intake_metadata(report: IntakeReport, requeued: int = 0) -> dict[str, Any]:
    """The ``crawls`` materialisation's metadata, from a run of the asset or the seeds sensor."""
    return {
        "crawls_registered": len(report.crawls),
        "crawl_ids": ", ".join(report.crawls) or "-",
        "seeds_admitted": report.admitted,
        "dead_letters": report.dead_letters,
        "requeued": requeued,
    }


def crawls_materialization(report: IntakeReport, ranges: list[str]) -> AssetMaterialization:
    """What the seeds sensor reports when it registered ``ranges`` itself (a runless event of ``crawls``)."""
    return AssetMaterialization(asset_key=crawls.key, metadata=intake_metadata(report),
                                description=f"registered by the seeds sensor: {', '.join(ranges)}")


class CrawlRequestConfig(Config):
    seeds: list[str] = Field(description="Start URLs (http/https).")
    crawl_id: str = Field("", description="Empty: generated from the first seed's host and the time.")
    max_pages: int = Field(10_000, description="Most URLs the crawl admits.")
    max_depth: int = Field(10, description="Most link hops from a seed.")
    scope: str = Field("host", description="host | domain | any")
    allow: list[str] = Field(default_factory=list, description="Follow only URLs matching one of these regexes.")
    deny: list[str] = Field(default_factory=list, description="Never follow URLs matching one of these regexes.")
    max_pages_per_host: int = Field(0, description="Most URLs admitted per host (0: no cap).")
    user_agent: str = Field("", description="User-Agent of this crawl (empty: CRAWL_USER_AGENT).")
    use_sitemaps: bool = Field(False, description="Also seed from the seed hosts' sitemaps.")
    host_delay_ms: int = Field(0, description="This crawl's gap between requests to a host (0: CRAWL_HOST_DELAY_MS; "
                               "at least CRAWL_MIN_HOST_DELAY_MS).")
    host_concurrency: int = Field(0, description="This crawl's requests in flight per host (0: "
                                  "CRAWL_HOST_CONCURRENCY; at most CRAWL_MAX_REQUESTS_PER_HOST).")
    priority: int = Field(0, description="Higher runs this crawl's batches first when the run queue is full "
                          "(at most CRAWL_MAX_PRIORITY).")
    every: str = Field("", description="Crawl again every interval, e.g. 6h, 1d (empty: not recurring).")
    cron: str = Field("", description="Crawl again on a 5-field cron schedule, UTC (empty: not recurring).")
    extract_rules: str = Field("", description="Extraction rules as YAML or JSON text (docs/extraction.md); "
                               "their records land in `records`. Empty: none.")
    render: str = Field("never", description="Run pages' JavaScript in a headless browser: never | always | auto "
                        "(pages that need it, and their hosts from then on; docs/rendering.md). Needs Chromium.")
    screenshots: bool = Field(False, description="With render: archive a screenshot of each rendered page.")


def request_run_config(request: CrawlRequest) -> dict[str, Any]:
    """The ``submit_crawl_job`` run config that submits ``request`` again, with every option."""
    return {"ops": {"submit_crawl_request": {"config": {
        "seeds": list(request.seeds), "crawl_id": request.crawl_id, "max_pages": request.max_pages,
        "max_depth": request.max_depth, "scope": request.scope, "allow": list(request.allow_patterns),
        "deny": list(request.deny_patterns), "max_pages_per_host": request.max_pages_per_host,
        "user_agent": request.user_agent, "use_sitemaps": request.use_sitemaps,
        "host_delay_ms": request.host_delay_ms, "host_concurrency": request.host_concurrency,
        "priority": request.priority, "extract_rules": request.extract_rules, "render": request.render,
        "screenshots": request.screenshots}}}}


@op
def submit_crawl_request(context: OpExecutionContext, config: CrawlRequestConfig,
                         crawl: CrawlSettingsResource) -> str:
    try:
        request = build_crawl_request(
            config.seeds, config.crawl_id or None, config.max_pages, config.max_depth, config.scope,
            allow=config.allow, deny=config.deny, max_pages_per_host=config.max_pages_per_host,
            user_agent=config.user_agent, use_sitemaps=config.use_sitemaps, every=config.every or None,
            cron=config.cron or None, host_delay_ms=config.host_delay_ms,
            host_concurrency=config.host_concurrency, priority=config.priority,
            extract=parse_rules(config.extract_rules, "extract_rules") if config.extract_rules.strip() else None,
            render=config.render, screenshots=config.screenshots,
        )
    except ValueError as err:  # InvalidURLError and RulesError are ValueErrors
        raise Failure(f"bad crawl request: {err}") from None
    refusal = render_refusal(request, crawl.settings())
    if refusal is not None:
        raise Failure(f"bad crawl request: {refusal}")
    bus = crawl.bus()
    conflict = registration_conflict(crawl.store(), bus, request)
    if conflict is not None:  # the seeds sensor would refuse it: nothing is submitted
        raise Failure(f"bad crawl request: {conflict}")
    submit_crawl(bus, request)
    context.log.info(f"submitted crawl {request.crawl_id} with {len(request.seeds)} seeds")
    return request.crawl_id


@job(description="Submit a crawl (seeds and limits) to the seeds topic, as `crawl-platform crawl` does.")
def submit_crawl_job() -> None:
    submit_crawl_request()
