"""Figures about the running platform: per-crawl progress and frontier lag for the UI's plots
(``progress``), and which batch partitions are past retention (``retention``). No Dagster."""
