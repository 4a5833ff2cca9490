"""A crawl's rows of a lake table, copied by DuckDB into a Parquet or JSON lines file.

A crawl's rows are those of its page versions (``pages.crawl_id``) and what hangs off them
(``documents``, ``links`` by URL and version); any other table with a ``crawl_id`` column gives
its rows of the crawl (:func:`crawl_rows`). :func:`copy_rows` runs ``COPY (SELECT …) TO …`` on
the connection of the caller's read, so the files of one read agree at one snapshot.
:mod:`crawl_platform.archive.export` names the files and writes each under a temporary name.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

_CRAWL_ROWS = {
    "pages": "SELECT * FROM pages WHERE crawl_id = $crawl",
    "documents": """SELECT d.* FROM documents d JOIN pages p USING (url, version) WHERE p.crawl_id = $crawl""",
    "links": """SELECT l.* FROM links l JOIN pages p ON p.url = l.src_url AND p.version = l.src_version
                WHERE p.crawl_id = $crawl""",
}
_COPY_OPTIONS = {"parquet": "FORMAT parquet, COMPRESSION zstd", "jsonl": "FORMAT json"}
FILE_FORMATS = tuple(_COPY_OPTIONS)


class NoCrawlRowsError(ValueError):
    """A table that is not in the lake or has no ``crawl_id`` column; ``str(err)`` is one line
    naming the tables that do have a crawl's rows."""


def crawl_rows(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """The query of a crawl's rows of ``table`` (the crawl is its ``$crawl`` parameter); raises
    :class:`NoCrawlRowsError`."""
    if table in _CRAWL_ROWS:
        return _CRAWL_ROWS[table]
    columns = {row[0] for row in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_name = ?", [table]).fetchall()}
    if "crawl_id" not in columns:
        known = sorted({*_CRAWL_ROWS, *(r[0] for r in con.execute(
            "SELECT DISTINCT table_name FROM information_schema.columns WHERE table_catalog = current_database() "
            "AND column_name = 'crawl_id'").fetchall())})
        what = "has no crawl_id column" if columns else "is not a lake table"
        raise NoCrawlRowsError(f"table {table!r} {what}; tables with a crawl's rows: {', '.join(known)}")
    return f'SELECT * FROM "{table}" WHERE crawl_id = $crawl'


def copy_rows(con: duckdb.DuckDBPyConnection, query: str, crawl_id: str, path: Path, fmt: str) -> int:
    """Write the rows of ``query`` (from :func:`crawl_rows`) for ``crawl_id`` to ``path`` in
    ``fmt`` (one of :data:`FILE_FORMATS`); how many rows."""
    quoted = str(path).replace("'", "''")
    rows = con.execute(f"COPY ({query}) TO '{quoted}' ({_COPY_OPTIONS[fmt]})", {"crawl": crawl_id}).fetchone()
    return int(rows[0]) if rows else 0
