"""Moving whole crawl tables into a lake: the column mapping, the copy and the check that it is exact.

Backups and restores (:mod:`crawl_platform.lake.backup`) and the import of an old single-file
store (:mod:`crawl_platform.lake.migrate`) find what to copy here (:func:`snapshot_to_copy`,
:func:`archive_files`, :func:`old_tables`), open a DuckDB connection of their own with the target
lake and the source (read-only) attached, and copy every table of
:data:`~crawl_platform.store.schema.TABLES` in one write transaction of the target, under its
write lock, so the target shows all of the copy or none of it. Columns are matched by name and
cast to the target's types: a column the source lacks lands NULL, a renamed one is read under its
old name. Each copy is checked against its source by a :class:`TableFingerprint` (row count and an
order-independent hash of the rows); a copy that differs raises, which rolls the transaction back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from crawl_platform.store.database import CrawlStore
from crawl_platform.store.engine import current_snapshot, new_engine, transaction, use_object_storage
from crawl_platform.store.errors import StoreUnavailableError, scrubbed_errors
from crawl_platform.store.extensions import load_extensions
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.schema import TABLES


class TransferRefusedError(ValueError):
    """A backup, restore or import that cannot be done as asked (the destination is not empty, no
    manifest, the lake already holds crawl data, no such snapshot or file). Nothing was written;
    ``str(err)`` is one line saying what to do instead (the CLI exits 2 with it)."""


class TransferFailedError(RuntimeError):
    """A copy failed, or what landed differs from its source or from a backup's manifest. The
    transaction was rolled back; ``str(err)`` is one line naming the table (the CLI exits 1)."""


@dataclass(frozen=True)
class TableFingerprint:
    """What a table holds, independent of row order and storage: its row count, and the sum
    modulo 2**64 of the MD5 (low 64 bits) of each row's JSON, as 16 hex digits."""

    rows: int
    digest: str


EMPTY = TableFingerprint(0, f"{0:016x}")


def one_line(text: object) -> str:
    """A DuckDB error as one line: its first paragraph (not the echoed SQL and caret below it)."""
    return " ".join(str(text).split("\n\n", 1)[0].split())


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[str, str]]:
    """(name, type) of each column of ``relation`` (a table name, or ``t AT (VERSION => n)``)."""
    return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]


def fingerprint(con: duckdb.DuckDBPyConnection, query: str) -> TableFingerprint:
    """The fingerprint of the rows ``query`` returns; column names and types are part of it."""
    row = con.execute(f"SELECT count(*), sum(md5_number_lower(to_json(r))) FROM ({query}) AS r").fetchone()
    rows, total = (int(row[0]), int(row[1] or 0)) if row else (0, 0)
    return TableFingerprint(rows, f"{total % 2**64:016x}")


def table_fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, TableFingerprint]:
    """The fingerprint of every crawl table of the lake ``con`` reads (its default catalog)."""
    out = {}
    for table in TABLES:
        names = ", ".join(quote_ident(name) for name, _ in columns(con, table))
        out[table] = fingerprint(con, f"SELECT {names} FROM {table}")
    return out


def row_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows per crawl table of the lake ``con`` reads."""
    counts = {}
    for table in TABLES:
        row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
        counts[table] = int(row[0]) if row else 0
    return counts


def refuse_unless_empty(con: duckdb.DuckDBPyConnection, catalog: str, replace: bool) -> None:
    """Raise :class:`TransferRefusedError` when the lake ``con`` writes holds crawl data and the
    caller may not ``replace`` it (``catalog`` names that lake in the error, as it may be shown)."""
    held = {table: n for table, n in row_counts(con).items() if n}
    if held and not replace:
        rows = ", ".join(f"{n} {table}" for table, n in held.items())
        raise TransferRefusedError(f"the lake at {catalog} already holds crawl data ({rows}): "
                                   "--force replaces it (its current state stays readable by time travel)")


def copy_tables(con: duckdb.DuckDBPyConnection, sources: Mapping[str, str | None], *,
                renames: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, TableFingerprint]:
    """Make each crawl table of the lake ``con`` writes (its default catalog) hold exactly the rows
    of the relation ``sources`` names for it (``src.main.pages AT (VERSION => 7)``,
    ``old.main.pages``; None: the source has no such table, it ends empty), inside the caller's
    write transaction. Rows already there are deleted: callers decide whether that is allowed.

    ``renames`` maps a table to ``{target column: source column}``. Returns each table's
    fingerprint as landed, which equals the source's; raises :class:`TransferFailedError` (the
    caller's transaction then rolls back) when it does not or DuckDB fails.
    """
    landed = {}
    for table in TABLES:
        try:
            landed[table] = _copy_table(con, table, sources.get(table), (renames or {}).get(table, {}))
        except duckdb.Error as err:
            raise TransferFailedError(f"copying {table} failed: {one_line(err)}") from None
    return landed


def _copy_table(con: duckdb.DuckDBPyConnection, table: str, source: str | None,
                renamed: Mapping[str, str]) -> TableFingerprint:
    target = columns(con, table)
    names = ", ".join(quote_ident(name) for name, _ in target)
    con.execute(f"DELETE FROM {table}")
    expected = EMPTY
    if source is not None:
        have = {name for name, _ in columns(con, source)}
        select = ", ".join(
            f"CAST({_source_column(name, have, renamed)} AS {kind}) AS {quote_ident(name)}" for name, kind in target
        )
        query = f"SELECT {select} FROM {source}"
        expected = fingerprint(con, query)
        con.execute(f"INSERT INTO {table} ({names}) {query}")
    landed = fingerprint(con, f"SELECT {names} FROM {table}")
    if landed != expected:
        raise TransferFailedError(f"copying {table} failed: {landed.rows} rows ({landed.digest}) landed, "
                                  f"the source holds {expected.rows} ({expected.digest})")
    return landed


def _source_column(name: str, have: set[str], renamed: Mapping[str, str]) -> str:
    if name in have:
        return quote_ident(name)
    old = renamed.get(name)
    return quote_ident(old) if old in have else "NULL"


def connect(*catalog_kinds: str) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection of its own, configured as the store's (no extension downloaded or
    autoloaded behind our back, no table name resolving to a Python variable), with DuckLake and
    the drivers of ``catalog_kinds`` (``sqlite``/``postgres``) loaded."""
    con = new_engine()
    try:
        for kind in dict.fromkeys(catalog_kinds):
            load_extensions(con, kind)
    except BaseException:
        con.close()
        raise
    return con


@dataclass(frozen=True)
class Source:
    """What a copy reads, attached read-only under ``alias`` by ``attach_sql``; ``what`` names it
    in errors, ``location`` is a lake source's (None: a plain DuckDB file)."""

    alias: str
    attach_sql: str = field(repr=False)  # holds a PostgreSQL catalog's connection string
    what: str
    location: LakeLocation | None = None

    @property
    def catalog_kind(self) -> str | None:
        """The catalog driver a lake source needs (None: a plain DuckDB file)."""
        return self.location.kind if self.location else None

    @classmethod
    def lake(cls, location: LakeLocation, what: str, *, moved: bool = False) -> Source:
        """A lake read-only; ``moved``: its files are under ``location.data_path`` whatever data path
        its catalog recorded (a backup folder that was copied elsewhere)."""
        attach = location.attach_sql(read_only=True, alias="source")
        if moved:
            attach = attach[:-1] + ", OVERRIDE_DATA_PATH TRUE)"
        return cls("source", attach, what, location)

    @classmethod
    def duckdb_file(cls, path: Path) -> Source:
        quoted = str(path).replace("'", "''")
        return cls("source", f"ATTACH '{quoted}' AS source (READ_ONLY)", str(path))


@contextmanager
def write_transaction(target: CrawlStore, source: Source) -> Iterator[duckdb.DuckDBPyConnection]:
    """One write transaction of the lake of ``target`` (created when missing), on a DuckDB
    connection of its own where that lake is the default catalog and ``source`` is attached
    read-only: committed when the block ends, rolled back when it raises, under the lake's write
    lock throughout. A lake or source that cannot be attached raises :class:`StoreUnavailableError`."""
    target.ensure_schema()
    con = connect(target.location.kind, *([source.catalog_kind] if source.catalog_kind else []))
    lakes = [target.location, *([source.location] if source.location else [])]
    try:
        with scrubbed_errors(*lakes):
            for lake in lakes:
                use_object_storage(con, lake)
            for sql, what in ((target.location.attach_sql(alias="target"), f"the lake {target.location.shown_catalog}"),
                              (source.attach_sql, source.what)):
                try:
                    con.execute(sql)
                except duckdb.Error as err:
                    raise StoreUnavailableError(f"cannot open {what}: {one_line(err)}") from None
            con.execute("USE target")
            with target.lake_write_lock(), transaction(con):
                yield con
    finally:
        con.close()


def old_tables(path: Path) -> list[str]:
    """The crawl tables the old store file at ``path`` holds. Refused (:class:`TransferRefusedError`)
    when it is missing, not a DuckDB file or holds none of them; a file another process has open
    for writing is :class:`StoreUnavailableError`."""
    if not path.is_file():
        raise TransferRefusedError(f"no such file: {path}")
    try:
        con = duckdb.connect(str(path), read_only=True, config={"autoload_known_extensions": False,
                                                                 "autoinstall_known_extensions": False})
    except duckdb.IOException as err:
        if "lock" in str(err).lower():
            raise StoreUnavailableError(f"{path} is open in another process (stop the old stack first): "
                                        f"{one_line(err)}") from None
        raise TransferRefusedError(f"{path} is not a DuckDB database: {one_line(err)}") from None
    except duckdb.Error as err:
        raise TransferRefusedError(f"{path} is not a DuckDB database: {one_line(err)}") from None
    try:
        found = {str(r[0]) for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    finally:
        con.close()
    present = [table for table in TABLES if table in found]
    if not present:
        raise TransferRefusedError(f"{path} holds none of the crawl tables ({', '.join(TABLES)})")
    return present


def snapshot_to_copy(con: duckdb.DuckDBPyConnection, alias: str, wanted: int | None) -> tuple[int, str]:
    """The snapshot to read (the latest when ``wanted`` is None) and its commit time; refused when
    the lake has no such snapshot or its crawl tables did not exist yet."""
    latest = current_snapshot(con, alias)
    snapshot_id = latest if wanted is None else wanted
    row = con.execute(f"SELECT snapshot_time FROM {alias}.snapshots() WHERE snapshot_id = ?", [snapshot_id]).fetchone()
    if row is None:
        raise TransferRefusedError(f"the lake has no snapshot {snapshot_id} (its latest is {latest})")
    for table in TABLES:
        try:
            con.execute(f"DESCRIBE SELECT * FROM {alias}.main.{table} AT (VERSION => {snapshot_id})")
        except duckdb.CatalogException:
            raise TransferRefusedError(f"snapshot {snapshot_id} predates the crawl tables "
                                       f"(no {table} yet): pick a later one") from None
    when: datetime = row[0]
    return snapshot_id, when.astimezone(UTC).isoformat()


def archive_files(con: duckdb.DuckDBPyConnection, pages: str) -> list[str]:
    """The WARC files the pages at a snapshot point into (none before the archive existed)."""
    columns = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {pages}").fetchall()}
    if "warc_file" not in columns:
        return []
    return [r[0] for r in con.execute(f"SELECT DISTINCT warc_file FROM {pages} WHERE warc_file IS NOT NULL "
                                      "ORDER BY 1").fetchall()]
