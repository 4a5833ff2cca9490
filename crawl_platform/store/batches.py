"""The ``batch_items`` and ``batch_ranges`` tables: what each landed batch held, and where on the frontier topic.

A batch's landing transaction records every item with its outcome (:func:`record_items`) and the
offset ranges its key names (:func:`record_ranges`); a batch has landed once it has items. The
functions run on the connection of the caller's read or write.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:  # the lean commands (crawl, status) read the store without importing pyarrow
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


def has_landed(con: duckdb.DuckDBPyConnection, batch_id: str) -> bool:
    """True once the batch's landing transaction committed (its items are recorded)."""
    return bool(con.execute("SELECT count(*) FROM batch_items WHERE batch_id = ?", [batch_id]).fetchone()[0])  # type: ignore[index]


def crawls_of(con: duckdb.DuckDBPyConnection, batch_ids: Sequence[str]) -> list[str]:
    """The crawl ids with items in the landed batches ``batch_ids``."""
    rows = con.execute("SELECT DISTINCT crawl_id FROM batch_items WHERE list_contains(?, batch_id)",
                       [sorted(batch_ids)]).fetchall()
    return [r[0] for r in rows]


def landed_ends(con: duckdb.DuckDBPyConnection, epoch: int,
                partitions: Collection[int] | None = None) -> list[tuple[int, int]]:
    """``(partition, end)``: the end of the last offset range a batch of ``epoch`` landed in each
    frontier partition (of ``partitions`` only, if given)."""
    sql = 'SELECT "partition", max(end_offset) FROM batch_ranges WHERE epoch = ?'
    params: list[object] = [epoch]
    if partitions is not None:
        sql += ' AND list_contains(?, "partition")'
        params.append(sorted(partitions))
    return con.execute(sql + ' GROUP BY "partition"', params).fetchall()
