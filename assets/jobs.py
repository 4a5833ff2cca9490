"""Jobs over the crawl assets, with the executor chosen in one place.

``crawl_batch_job`` runs one frontier batch (plan, fetch shards, land, frontier);
``crawl_intake_job`` registers crawls from the seeds topic; ``crawl_quality_job`` runs the Great
Expectations checks over the batches landed since its last run (see ``sensors/quality.py``), so
no batch run pays for importing Great Expectations. The batch and intake jobs use the in-process
executor by default: a batch's steps are short and share nothing but DuckDB, so a process per step
would cost more than it saves. ``crawl_batch_celery_job`` is the scale-out variant.
"""

from dagster import AssetSelection, define_asset_job, in_process_executor
from dagster_celery import celery_executor

from crawl_platform_dagster.assets.checks import quality_checks
from crawl_platform_dagster.assets.crawl_batch import frontier_batches

_BATCH_ASSETS = AssetSelection.assets("pages", "documents", "links", "frontier").without_checks()

crawl_batch_job = define_asset_job(
    "crawl_batch_job",
    selection=_BATCH_ASSETS,
    partitions_def=frontier_batches,
    executor_def=in_process_executor,
    description="Fetch, parse and land one frontier batch, then publish its new URLs.",
)

# The scale-out profile (CRAWL_EXECUTOR=celery): the same steps, each on a Celery worker. The
# frontier sensor picks this job at tick time, so switching needs no code change or reload.
crawl_batch_celery_job = define_asset_job(
    "crawl_batch_celery_job",
    selection=_BATCH_ASSETS,
    partitions_def=frontier_batches,
    executor_def=celery_executor,
    description="crawl_batch_job with its steps on Celery workers (CRAWL_EXECUTOR=celery).",
)

crawl_intake_job = define_asset_job(
    "crawl_intake_job",
    selection=AssetSelection.assets("crawls").without_checks(),
    executor_def=in_process_executor,
    description="Register crawls from the seeds topic and put their seeds on the frontier.",
)

crawl_quality_job = define_asset_job(
    "crawl_quality_job",
    selection=AssetSelection.checks(*quality_checks),
    executor_def=in_process_executor,
    description="Great Expectations checks on the pages and documents of recently landed batches.",
)
