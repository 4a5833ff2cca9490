"""The ``documents_markdown`` table: each HTML page version as Markdown, and the versions still without it.

:mod:`crawl_platform.markdown.documents` reads a crawl's pending versions (:func:`pending_versions`),
extracts them from the archive outside any lock, and inserts the rows (:func:`insert_new`), skipping
any another run inserted meanwhile, so the key ``(url, version)`` holds. Every function runs on the
connection of the caller's read or write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:  # the lean commands (crawl, status) read the store without importing pyarrow
    import pyarrow as pa

_PENDING = """SELECT d.url, d.version, p.warc_file IS NOT NULL FROM documents d JOIN pages p USING (url, version)
              WHERE p.crawl_id = ? AND NOT EXISTS (
                  SELECT 1 FROM documents_markdown m WHERE m.url = d.url AND m.version = d.version)"""


def pending_versions(con: duckdb.DuckDBPyConnection, crawl_id: str) -> list[tuple[str, int, bool]]:
    """``(url, version, archived)`` of the crawl's page versions with a ``documents`` row (an HTML
    page) and no Markdown yet; ``archived``: it has an archive record to extract from."""
    return con.execute(_PENDING, [crawl_id]).fetchall()


def insert_new(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> int:
    """In the caller's write transaction: ``rows`` (url, version, markdown, published_date,
    extractor, error) whose ``(url, version)`` has no row yet; how many were inserted."""
    con.register("extracted_markdown", rows)
    inserted = con.execute(
        """INSERT INTO documents_markdown (url, version, markdown, published_date, extractor, error)
           SELECT e.* FROM extracted_markdown e WHERE NOT EXISTS (
               SELECT 1 FROM documents_markdown m WHERE m.url = e.url AND m.version = e.version)"""
    ).fetchone()
    return int(inserted[0]) if inserted else 0
