"""Jobs over the crawl assets, with the executor chosen in one place.

``crawl_batch_job`` runs one frontier batch (pages, documents, links, frontier and their checks);
``crawl_intake_job`` registers crawls from the seeds topic. Both use the in-process executor by
default: a batch's steps are short and share nothing but DuckDB, so a process per step would
cost more than it saves.
"""

from dagster import AssetSelection, define_asset_job, in_process_executor

from assets.crawl_batch import frontier_batches

crawl_batch_job = define_asset_job(
    "crawl_batch_job",
    selection=AssetSelection.assets("pages", "documents", "links", "frontier"),
    partitions_def=frontier_batches,
    executor_def=in_process_executor,
    description="Fetch, parse and land one frontier batch, then publish its new URLs.",
)

crawl_intake_job = define_asset_job(
    "crawl_intake_job",
    selection=AssetSelection.assets("crawls"),
    executor_def=in_process_executor,
    description="Register crawls from the seeds topic and put their seeds on the frontier.",
)
