"""Import of the old store, one DuckDB file (``data/crawl.duckdb``), into the lake.

The old file has the same tables and column names as :file:`schema.sql`, with three differences
handled here: ``hosts.host`` is now ``hosts.origin`` (the same ``scheme://netloc`` values), files
made before a column was added (``pages.etag`` … ``crawls.use_sitemaps``) lack it, and the first
release had no ``hosts`` table. Missing columns land NULL and a missing table lands empty. The
file is opened read-only with plain DuckDB (no extension) and its tables are copied in one write
transaction of the lake, both by :mod:`crawl_platform.store.transfer`, which checks every table's
rows against the file's. ``crawl-platform migrate`` calls :func:`migrate_file`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crawl_platform.store.database import CrawlStore
from crawl_platform.store.engine import current_snapshot
from crawl_platform.store.transfer import (
    Source,
    TableFingerprint,
    copy_tables,
    old_tables,
    refuse_unless_empty,
    write_transaction,
)

RENAMES = {"hosts": {"origin": "host"}}  # table -> {lake column: old column}


@dataclass(frozen=True)
class Migration:
    """What an import landed: each table's fingerprint (equal to the file's), and the lake's
    snapshot just before it (its earlier contents, for time travel after a replace)."""

    tables: dict[str, TableFingerprint]
    previous_snapshot_id: int


def migrate_file(path: Path, store: CrawlStore, *, replace: bool = False) -> Migration:
    """Import the old store file at ``path`` into the lake of ``store`` (created when missing).

    A lake that already holds crawl data is refused (:class:`TransferRefusedError`, nothing
    written) unless ``replace``, which swaps its contents for the file's. Raises
    :class:`~crawl_platform.store.transfer.TransferFailedError` (nothing written) when a table
    cannot be copied exactly.
    """
    path = path.resolve()
    present = old_tables(path)
    with write_transaction(store, Source.duckdb_file(path)) as con:
        previous = current_snapshot(con, "target")
        refuse_unless_empty(con, store.location.shown_catalog, replace)
        tables = copy_tables(con, {t: f"source.main.{t}" for t in present}, renames=RENAMES)
    return Migration(tables, previous)
