"""The lake's catalog database as the store finds it before attaching: ready or not, and its file's mode.

:class:`~crawl_platform.store.database.CrawlStore` asks :func:`sqlite_catalog_ready` or
:func:`postgres_catalog_ready` whether a catalog already holds a DuckLake, so that an existing
lake opens without the write lock, and calls :func:`prepare_sqlite_catalog` under that lock before
it creates one. These talk to the catalog directly (``sqlite3``, ``psycopg2``), not through
DuckDB, which is why they live apart from the store that attaches it. :func:`checkpoint_sqlite_catalog`
makes an embedded catalog one file again, for a backup (:mod:`crawl_platform.lake.backup`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crawl_platform.store.errors import StoreUnavailableError
from crawl_platform.store.errors import one_line as _one_line
from crawl_platform.store.location import LakeLocation

CATALOG_TABLE = "ducklake_metadata"  # the first table DuckLake creates in its catalog


def prepare_sqlite_catalog(path: Path) -> None:
    """Create the catalog's folder and switch the SQLite file to WAL mode, in which readers never
    block a writer's commit (the default journal makes a reading snapshot block every commit).
    Called under the lake's write lock; the mode stays with the file."""
    try:
        db = sqlite3.connect(path, timeout=30)
        try:
            if db.execute("PRAGMA journal_mode").fetchone() != ("wal",):
                db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()
    except (OSError, sqlite3.Error) as err:
        raise StoreUnavailableError(f"the lake catalog {path} cannot be opened: {err}") from None


def checkpoint_sqlite_catalog(path: Path) -> None:
    """Fold an SQLite catalog's write-ahead log into its file, so the file alone is the whole
    catalog (a backup's, before it is uploaded to object storage). Call it with no writer open."""
    db = sqlite3.connect(path, timeout=30)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def sqlite_catalog_ready(path: Path) -> bool:
    """True when the SQLite catalog at ``path`` holds a DuckLake and is in WAL mode (so attaching
    it creates nothing); False for a missing or unreadable file."""
    if not path.exists():
        return False
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            wal = db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            table = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                               [CATALOG_TABLE]).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return False  # the locked open reports what is wrong with the file
    return wal and table is not None


def postgres_catalog_ready(location: LakeLocation) -> bool:
    """True when the PostgreSQL catalog of ``location`` holds a DuckLake; a
    :class:`StoreUnavailableError` (no password in it) when the server cannot be reached."""
    import psycopg2  # noqa: PLC0415 - only a PostgreSQL catalog needs it

    try:
        conn = psycopg2.connect(location.catalog.split(":", 1)[1], connect_timeout=10)
    except psycopg2.Error as err:
        message = _one_line(f"cannot open the lake {location.catalog}: {err}")
        raise StoreUnavailableError(location.scrub(message)) from None
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", [CATALOG_TABLE])
            row = cur.fetchone()
        return bool(row and row[0])
    finally:
        conn.close()
