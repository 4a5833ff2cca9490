"""Sensor that keeps each crawl's ``records`` up to date as its batches land, off the crawl's path.

Every 30 s it asks the engine which crawls with extraction rules have pages not yet extracted
with their current rules (:func:`crawl_platform.extract.run.due_extractions`), adds each such
crawl as a partition of ``extract_crawls`` (so it also appears in the UI's partition picker),
and requests one ``records_job`` run per crawl, never while that crawl's previous one is still
going. The batch runs themselves never extract: extraction costs milliseconds per page.
"""

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from crawl_platform.bus.messages import crawl_id_problem
from crawl_platform.extract.run import due_extractions
from crawl_platform_dagster.assets.records import EXTRACT_PARTITIONS, extract_crawls, records_job
from crawl_platform_dagster.resources.store import CrawlStoreResource
from crawl_platform_dagster.sensors.kafka import ACTIVE_RUN_STATUSES


@sensor(
    job=records_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Extracts records for crawls with extraction rules as their pages land (one run per crawl).",
)
def records_sensor(context: SensorEvaluationContext, crawl_store: CrawlStoreResource) -> SensorResult | SkipReason:
    store = crawl_store.store()
    if not store.exists():
        return SkipReason("no lake yet")
    due = []
    for item in due_extractions(store):
        # A crawl registered under an id that is no partition key (the lake may hold ids that no
        # submission check saw) is passed over, not allowed to stop the other crawls' records.
        problem = crawl_id_problem(item.crawl_id)
        if problem is None:
            due.append(item)
        else:
            context.log.warning(f"records of crawl {item.crawl_id!r} are not extracted: {problem}")
    if not due:
        return SkipReason("every crawl's records are up to date with its rules")
    known = set(context.instance.get_dynamic_partitions(EXTRACT_PARTITIONS))
    new_partitions = [d.crawl_id for d in due if d.crawl_id not in known]
    requests = []
    for item in due:
        running = context.instance.get_runs_count(RunsFilter(
            job_name=records_job.name, statuses=ACTIVE_RUN_STATUSES,
            tags={"dagster/partition": item.crawl_id}))
        if running:
            continue
        requests.append(RunRequest(
            partition_key=item.crawl_id,
            run_key=f"records-{item.crawl_id}-{item.rules_digest}-{store.snapshot_id()}",
            tags={"crawl/pending_pages": str(item.pending)},
        ))
    return SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[extract_crawls.build_add_request(new_partitions)] if new_partitions else [],
        skip_reason=None if requests else "the due crawls' previous runs are still going",
    )
