"""The ``batch_items`` and ``batch_ranges`` tables: what each landed batch held, and where on the frontier topic.

A batch's landing transaction records every item with its outcome (:func:`record_items`) and the
offset ranges its key names (:func:`record_ranges`); a batch has landed once it has items. The
functions run on the connection of the caller's read or write.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa


def record_items(con: duckdb.DuckDBPyConnection, batch_id: str, items: pa.Table) -> None:
    """In the caller's write transaction: the batch's ``items`` (``crawl_id``, ``url``, ``depth``,
    ``outcome``) replace any it had (a batch landed again), one row per (crawl, URL)."""
    con.register("inc_items", items)
    con.execute("DELETE FROM batch_items WHERE batch_id = ?", [batch_id])
    con.execute(
        """INSERT INTO batch_items (batch_id, crawl_id, url, depth, outcome)
           SELECT DISTINCT ON (crawl_id, url) ?, crawl_id, url, depth, outcome
           FROM inc_items""",
        [batch_id],
    )


def record_ranges(con: duckdb.DuckDBPyConnection, batch_id: str, epoch: int, partitions: Sequence[int],
                  starts: Sequence[int], ends: Sequence[int]) -> None:
    """In the caller's write transaction: the frontier offset ranges of the batch (one per
    partition, ``starts[i]`` to ``ends[i]``). Recording them again changes no partition's last end."""
    con.execute(
        """INSERT INTO batch_ranges (batch_id, epoch, "partition", start_offset, end_offset)
           SELECT ?, ?, unnest(?::INTEGER[]), unnest(?::BIGINT[]), unnest(?::BIGINT[])""",
        [batch_id, epoch, list(partitions), list(starts), list(ends)],
    )
