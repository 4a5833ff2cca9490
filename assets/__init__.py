"""Dagster assets of the crawl: intake, batch (pages, documents, links), frontier, near duplicates,
quality checks, exports and jobs."""
