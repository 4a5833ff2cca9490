"""The ``near_duplicates`` table, and the document prints its groups are made from.

:mod:`crawl_platform.dedup.near_duplicates` reads each crawl's prints (:func:`document_prints`),
groups them, and replaces the crawls' rows here in one write transaction
(:func:`replace_groups`), so the table always holds whole results. Every function runs on the
connection of the caller's read or write.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from crawl_platform.states import URLState


def document_prints(con: duckdb.DuckDBPyConnection, crawl_id: str) -> list[tuple[str, int, str, int | None]]:
    """``(url, version, content_hash, simhash)`` of the crawl's fetched URLs at their latest
    version, where that is a 2xx page with a document, by URL."""
    return con.execute(
        """WITH latest AS (
               SELECT url, version, status, content_hash FROM pages
               WHERE url IN (SELECT url FROM frontier WHERE crawl_id = ? AND state = ?)
               QUALIFY row_number() OVER (PARTITION BY url ORDER BY version DESC) = 1)
           SELECT l.url, l.version, l.content_hash, d.simhash
           FROM latest l JOIN documents d USING (url, version)
           WHERE l.status BETWEEN 200 AND 299 ORDER BY l.url""",
        [crawl_id, URLState.FETCHED.value],
    ).fetchall()


def replace_groups(con: duckdb.DuckDBPyConnection, crawl_ids: Sequence[str], groups: pa.Table) -> None:
    """In the caller's write transaction: the crawls' rows become ``groups`` (the table's columns,
    in its order: crawl_id, group_id, url, version, representative, kind, distance)."""
    con.register("found_duplicates", groups)
    con.register("grouped_crawls", pa.table({"crawl_id": pa.array(list(crawl_ids), pa.string())}))
    con.execute("DELETE FROM near_duplicates WHERE crawl_id IN (SELECT crawl_id FROM grouped_crawls)")
    con.execute("""INSERT INTO near_duplicates (crawl_id, group_id, url, version, representative, kind, distance)
                   SELECT * FROM found_duplicates""")
