"""The rows a data-quality check reads: the columns its rules look at, of the batches it checks.

:mod:`crawl_platform.quality.suites` names the columns and which of them it looks at only for
their nullness; those are read as TRUE or NULL, so a check of 20,000 documents does not load
20,000 texts, and the columns no rule looks at stay on disk (the Parquet files are read column by
column). Every function runs on the connection of the caller's read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    import pandas as pd


def pages_frame(con: duckdb.DuckDBPyConnection, columns: Sequence[str], markers: Collection[str],
                batches: list[str] | None) -> pd.DataFrame:
    """The ``columns`` of the ``pages`` rows of ``batches`` (every row if None); ``markers`` are
    read as TRUE or NULL."""
    if batches is None:
        return con.execute(_select(columns, markers) + " FROM pages", []).df()
    return con.execute(_select(columns, markers) + " FROM pages" + _in_batches("batch_id", batches),
                       list(batches)).df()


def documents_frame(con: duckdb.DuckDBPyConnection, columns: Sequence[str], markers: Collection[str],
                    batches: list[str] | None) -> pd.DataFrame:
    """The ``columns`` of the ``documents`` of ``batches`` (every row if None); ``markers`` are
    read as TRUE or NULL.

    documents has no batch_id: a document belongs to the batch that wrote its (url, version)
    page, and (url, version) is the primary key of pages, so the join cannot duplicate rows.
    """
    if batches is None:
        return con.execute(_select(columns, markers) + " FROM documents", []).df()
    sql = (
        _select(columns, markers, "d.")
        + " FROM documents AS d JOIN pages AS p ON p.url = d.url AND p.version = d.version"
        + _in_batches("p.batch_id", batches)
    )
    return con.execute(sql, list(batches)).df()


def _in_batches(column: str, batches: list[str]) -> str:
    return f" WHERE {column} IN ({', '.join('?' for _ in batches)})"


def _select(columns: Sequence[str], markers: Collection[str], alias: str = "") -> str:
    """The columns; one in ``markers`` is TRUE or NULL."""
    return "SELECT " + ", ".join(
        f"CASE WHEN {alias}{column} IS NULL THEN NULL ELSE TRUE END AS {column}" if column in markers
        else f"{alias}{column}" for column in columns)
