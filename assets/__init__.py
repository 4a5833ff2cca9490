"""Dagster assets of the crawl: intake, batch (pages, documents, links), frontier, quality checks, exports and jobs."""
