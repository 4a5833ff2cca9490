"""The ``crawls`` asset and the Launchpad job that submits a crawl.

Seeds arrive on the Kafka seeds topic (from the CLI, the Launchpad job below, or any producer);
the seeds sensor turns new offsets into a run of ``crawls``, which registers each crawl and puts
its seeds on the frontier. Materialising ``crawls`` by hand with ``requeue_pending`` re-publishes
every URL that is known but not fetched, for a broker that lost its data.
"""


from dagster import (
    AssetExecutionContext,
    Config,
    Failure,
    MaterializeResult,
    OpExecutionContext,
    asset,
    job,
    op,
)
from pydantic import Field

from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.extract.rules import parse_rules
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class IntakeConfig(Config):
    seed_ranges: list[str] = Field(default_factory=list, description="Seeds-topic offset ranges, e.g. p3-0-2.")
    requeue_pending: bool = Field(False, description="Re-publish every known URL not fetched yet.")


@asset(group_name="crawl", code_version="1", pool=DUCKDB_WRITER_POOL,
       description="Registered crawls (seeds, scope, limits); seeds enter the frontier here.")
def crawls(context: AssetExecutionContext, config: IntakeConfig,
           crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    intake = crawl.seed_intake()
    registered: list[str] = []
    dead_letters = admitted = 0
    for key in config.seed_ranges:
        report = intake.register(OffsetRange.parse(key))
        registered += report.crawls
        dead_letters += report.dead_letters
        admitted += report.admitted
    requeued = 0
    if config.requeue_pending:
        requeued = crawl.frontier().requeue_all_pending().published
    context.log.info(f"registered {registered}, {admitted} seeds admitted, {requeued} URLs re-published")
    return MaterializeResult(metadata={
        "crawls_registered": len(registered),
        "crawl_ids": ", ".join(registered) or "-",
        "seeds_admitted": admitted,
        "dead_letters": dead_letters,
        "requeued": requeued,
    })


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
    extract_rules: str = Field("", description="Extraction rules as YAML or JSON text (see the README); "
                               "their records land in `records`. Empty: none.")


@op
def submit_crawl_request(context: OpExecutionContext, config: CrawlRequestConfig,
                         crawl: CrawlSettingsResource) -> str:
    try:
        request = build_crawl_request(
            config.seeds, config.crawl_id or None, config.max_pages, config.max_depth, config.scope,
            allow=config.allow, deny=config.deny, max_pages_per_host=config.max_pages_per_host,
            user_agent=config.user_agent, use_sitemaps=config.use_sitemaps,
            extract=parse_rules(config.extract_rules, "extract_rules") if config.extract_rules.strip() else None,
        )
    except ValueError as err:  # InvalidURLError and RulesError are ValueErrors
        raise Failure(f"bad crawl request: {err}") from None
    submit_crawl(crawl.bus(), request)
    context.log.info(f"submitted crawl {request.crawl_id} with {len(request.seeds)} seeds")
    return request.crawl_id


@job(description="Submit a crawl (seeds and limits) to the seeds topic, as `crawl-platform crawl` does.")
def submit_crawl_job() -> None:
    submit_crawl_request()
