"""Lake maintenance: compact the small files every batch writes, expire old snapshots, remove files.

Every landed batch is one DuckLake snapshot with a few small Parquet files (or rows inlined in the
catalog), so a busy lake collects thousands of files, and every query opens all of them.
:func:`maintain_lake` runs DuckLake's own maintenance calls in the order its ``CHECKPOINT`` uses:
flush inlined rows to Parquet, expire snapshots older than the retention, merge adjacent small
files, rewrite files that are mostly deleted rows, then remove the files no retained snapshot
references and orphans no commit ever referenced. Merged files keep their rows' snapshot ranges,
so time travel within the retention still works. Each call takes its own turn on the lake's write
lock (:meth:`CrawlStore.exclusive`), so crawl writers wait for one step, not for the whole run;
readers never wait. A file is removed only once it has been unreferenced for ``reader_grace``,
because a read that began before the merge may still be scanning it. Both cutoffs are rounded back
to a UTC midnight (see :func:`_cutoff`), so they err on the side of keeping.
Neighbours: :mod:`crawl_platform.store.database` (the lake and its lock); the Dagster asset
``lake_maintenance`` runs this daily.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from crawl_platform.store.database import CrawlStore

READER_GRACE = timedelta(minutes=30)
"""How long an unreferenced file stays on storage: longer than any read of the lake takes."""


@dataclass(frozen=True)
class LakeFiles:
    """What the lake keeps on its data path, from its catalog."""

    data_files: int  # data and delete files some retained snapshot references
    bytes: int  # their size
    current_files: int  # the files a query of the latest snapshot opens
    awaiting_removal: int  # files no snapshot references any more, still on storage
    snapshots: int  # snapshots kept for time travel


@dataclass(frozen=True)
class MaintenanceReport:
    """One maintenance run: the lake before and after, and what each step did."""

    before: LakeFiles
    after: LakeFiles
    rows_flushed: int  # inlined rows written out from the catalog to Parquet files
    snapshots_expired: int
    files_merged: int  # small files merged (or mostly-deleted files rewritten) into fewer
    files_removed: int  # files deleted from the data path (unreferenced ones and orphans)
    seconds: float


def maintain_lake(store: CrawlStore, retention: timedelta, reader_grace: timedelta = READER_GRACE) -> MaintenanceReport:
    """Maintain the lake and report what changed. Keeps every snapshot younger than ``retention``
    (and always the latest); removes files unreferenced for longer than ``reader_grace``. Rows of
    the latest snapshot are untouched. Raises :class:`~crawl_platform.store.errors.StoreBusyError`
    when a step cannot get the write lock within the store's timeout."""
    started = time.monotonic()
    lake = store.alias
    before = measure_lake(store)
    flushed = _sum(_call(store, "CALL ducklake_flush_inlined_data(?)", [lake]), "rows_flushed")
    expired = _call(store, "CALL ducklake_expire_snapshots(?, older_than => ?)", [lake, _cutoff(retention)])
    merged = _sum(_call(store, "CALL ducklake_merge_adjacent_files(?)", [lake]), "files_processed")
    rewritten = _sum(_call(store, "CALL ducklake_rewrite_data_files(?)", [lake]), "files_processed")
    removed = _remove(store, "ducklake_cleanup_old_files", reader_grace)
    orphans = _remove(store, "ducklake_delete_orphaned_files", reader_grace)
    return MaintenanceReport(
        before=before,
        after=measure_lake(store),
        rows_flushed=flushed,
        snapshots_expired=len(expired),
        files_merged=merged + rewritten,
        files_removed=len(removed) + len(orphans),
        seconds=time.monotonic() - started,
    )


def measure_lake(store: CrawlStore) -> LakeFiles:
    """Files, bytes and snapshots of the lake, read from its catalog tables (the same on an
    embedded SQLite catalog and on PostgreSQL, whatever storage the data path is on)."""
    meta = f"__ducklake_metadata_{store.alias}"  # the catalog database DuckLake attaches beside the lake
    with store.read() as con:
        row = con.execute(f"""
            WITH files AS (
                SELECT file_size_bytes, end_snapshot FROM {meta}.ducklake_data_file
                UNION ALL
                SELECT file_size_bytes, end_snapshot FROM {meta}.ducklake_delete_file)
            SELECT (SELECT count(*) FROM files),
                   (SELECT coalesce(sum(file_size_bytes), 0) FROM files),
                   (SELECT count(*) FROM files WHERE end_snapshot IS NULL),
                   (SELECT count(*) FROM {meta}.ducklake_files_scheduled_for_deletion),
                   (SELECT count(*) FROM {meta}.ducklake_snapshot)""").fetchone()
    assert row is not None  # an aggregate query always returns its one row
    return LakeFiles(*(int(value) for value in row))


def _call(store: CrawlStore, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """One maintenance call in its own turn on the write lock and its own commit; its result rows."""
    with store.exclusive() as con:
        result = con.execute(sql, params)
        names = [column[0] for column in result.description or []]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def _sum(rows: list[dict[str, Any]], column: str) -> int:
    return sum(int(row[column] or 0) for row in rows)


def _remove(store: CrawlStore, function: str, grace: timedelta) -> list[dict[str, Any]]:
    """Remove the files ``function`` finds that are older than ``grace``; with no grace, all of
    them, whatever the catalog server's clock says (no writer is mid-commit: the call holds the
    write lock)."""
    if not grace:
        return _call(store, f"CALL {function}(?, cleanup_all => true)", [store.alias])
    return _call(store, f"CALL {function}(?, older_than => ?)", [store.alias, _cutoff(grace)])


def _cutoff(span: timedelta) -> datetime:
    """The ``older_than`` of a maintenance call keeping everything younger than ``span``: now for
    a zero span, else the last instant before the UTC midnight that starts the day of
    ``now - span``. DuckLake 1.5.5 compares ``older_than`` with a SQLite catalog's timestamps as
    text, which treats everything of the cutoff's own day as older; a cutoff at 23:59:59.999999
    of the day before is right under text and timestamp comparison alike (a PostgreSQL catalog
    compares timestamps), at the price of keeping up to one day more."""
    now = datetime.now(UTC)
    if not span:
        return now
    day = (now - span).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(microseconds=1)
