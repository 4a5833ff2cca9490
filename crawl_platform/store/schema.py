"""The lake's schema: the tables of :file:`schema.sql`, and what brings an existing lake up to it.

:mod:`crawl_platform.store.database` runs :func:`schema_upgrade` whenever it attaches a lake: a new
lake gets the whole file, and a lake made by an older release gains the tables and columns added
since (``ALTER TABLE ... ADD COLUMN``; the rows already there read NULL in them), under the lake's
write lock, in one snapshot. ``TABLES`` are the tables backup, restore and migrate carry.
"""

from __future__ import annotations

import functools
from importlib import resources

import duckdb

TABLES = ("crawls", "frontier", "pages", "documents", "links", "batch_items", "hosts", "page_event_batches",
          "batch_ranges", "crawl_schedules", "revisits", "records", "record_pages", "near_duplicates",
          "documents_markdown")


@functools.cache
def schema_columns() -> dict[str, dict[str, str]]:
    """Each table of :file:`schema.sql` and its columns with their types, in order (read once, by
    running the file in a throwaway in-memory DuckDB)."""
    con = duckdb.connect()
    try:
        con.execute(_schema_sql())
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = 'memory' ORDER BY table_name, column_index"
        ).fetchall()
    finally:
        con.close()
    columns: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        columns.setdefault(table, {})[column] = data_type
    return columns


def _schema_sql() -> str:
    return resources.files("crawl_platform.store").joinpath("schema.sql").read_text()


def schema_upgrade(con: duckdb.DuckDBPyConnection, alias: str) -> list[str]:
    """What brings the lake attached as ``alias`` to :file:`schema.sql`: nothing when it is
    current; the whole file for a new lake; otherwise the missing tables (the file's
    ``CREATE TABLE IF NOT EXISTS``) and an ``ALTER TABLE ... ADD COLUMN`` per column added since
    the lake was created (they read as NULL in the rows already there)."""
    # This lake's own tables and their columns, in one read of its catalog (DuckLake's metadata
    # tables, attached as __ducklake_metadata_<alias>): duckdb_columns() would read every lake the
    # process attached, and one unreachable catalog among them would stop every other lake from
    # opening; a DESCRIBE per table would cost each new run process a statement per table.
    meta = f"__ducklake_metadata_{alias}"
    rows = con.execute(
        f"""SELECT t.table_name, c.column_name FROM {meta}.ducklake_table t
            JOIN {meta}.ducklake_schema s ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL
            JOIN {meta}.ducklake_column c ON c.table_id = t.table_id AND c.end_snapshot IS NULL
            WHERE t.end_snapshot IS NULL AND s.schema_name = 'main' AND c.parent_column IS NULL
              AND t.table_name IN {TABLES}""").fetchall()
    present: dict[str, set[str]] = {}
    for table, column in rows:
        present.setdefault(table, set()).add(column)
    if not present:
        return [_schema_sql()]
    upgrade = [] if set(present) >= set(TABLES) else [_schema_sql()]
    for table in sorted(present):
        upgrade += [f"ALTER TABLE {alias}.main.{table} ADD COLUMN {column} {data_type}"
                    for column, data_type in schema_columns()[table].items() if column not in present[table]]
    return upgrade
