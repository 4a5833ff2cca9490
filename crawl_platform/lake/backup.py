"""Backups of the lake: its state at one snapshot, copied to a folder, and brought back.

A backup folder is itself a small embedded lake (``catalog.sqlite`` plus Parquet under ``data/``)
holding every crawl table as it was at one snapshot of the source lake, and a ``backup.json``
:class:`Manifest` written last: the snapshot, its time, and each table's row count and content
hash (:class:`~crawl_platform.store.transfer.TableFingerprint`). All tables are read ``AT
(VERSION => n)`` of the same snapshot, so the copy is consistent while crawls keep landing. A
backup holds that state, not the lake's history. :func:`restore_lake` lands a backup's tables into
any lake location (embedded or on PostgreSQL) in one transaction and checks them against the
manifest. The raw archive's WARC files that the snapshot's ``pages`` point into are copied
to the backup's ``archive/`` and back into the target's archive on restore. The copying is
:mod:`crawl_platform.store.transfer`'s; the CLI (``crawl-platform backup``
/ ``restore``) and a Dagster job call the two functions here.

A backup folder is a :class:`~crawl_platform.storage.Folder`, local or in object storage
(``s3://bucket/prefix/``). A backup into object storage is made in a local temporary folder (its
catalog is an SQLite file, which lives on a file system) and uploaded, the WARC files copied
straight from the archive, ``backup.json`` last; a restore from object storage downloads the
catalog and Parquet files into a temporary folder first and copies the WARC files straight into
the target's archive.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from crawl_platform.storage import Folder, as_folder
from crawl_platform.store.catalog import checkpoint_sqlite_catalog
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.schema import TABLES
from crawl_platform.store.transfer import (
    Source,
    TableFingerprint,
    TransferFailedError,
    TransferRefusedError,
    archive_files,
    copy_tables,
    one_line,
    refuse_unless_empty,
    snapshot_to_copy,
    write_transaction,
)

MANIFEST = "backup.json"
ARCHIVE = "archive"  # the backup's copy of the WARC files its pages point into
FORMAT = 1  # the manifest's layout version


@dataclass(frozen=True)
class Manifest:
    """What a backup holds: written to ``backup.json`` after the copy succeeded."""

    snapshot_id: int  # the source lake's snapshot the tables were read at
    snapshot_time: str  # ISO 8601, UTC: when that snapshot was committed
    created_at: str  # ISO 8601, UTC: when the backup was made
    source: str  # the source lake's catalog, as shown (no password: a restore names its own target)
    duckdb_version: str  # the hashes are of rows as this DuckDB renders them to JSON
    tables: dict[str, TableFingerprint]
    archive_files: int = 0  # WARC files the snapshot's pages point into, copied to archive/

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, where: Folder | Path) -> Manifest:
        """The manifest of the backup in ``where``; :class:`TransferRefusedError` when there is
        none or it cannot be read (an unfinished or foreign folder)."""
        folder = as_folder(where)
        path = f"{folder.url.rstrip('/')}/{MANIFEST}"
        try:
            data = json.loads(folder.get_bytes(MANIFEST))
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this version reads {FORMAT}")
            tables = {name: TableFingerprint(int(t["rows"]), str(t["digest"])) for name, t in data["tables"].items()}
            return cls(int(data["snapshot_id"]), str(data["snapshot_time"]), str(data["created_at"]),
                       str(data["source"]), str(data["duckdb_version"]), tables, int(data.get("archive_files", 0)))
        except FileNotFoundError:
            raise TransferRefusedError(f"{folder.url} is not a backup: it has no {MANIFEST} "
                                       "(an unfinished backup has none)") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise TransferRefusedError(f"{path} is not a readable backup manifest: {one_line(err)}") from None


def backup_location(folder: Path) -> LakeLocation:
    """The embedded lake a backup folder holds."""
    root = folder.resolve()
    return LakeLocation(f"sqlite:{root / 'catalog.sqlite'}", f"{root / 'data'}/")


def backup_lake(store: CrawlStore, dest: Folder | Path, snapshot: int | None = None) -> Manifest:
    """Copy the lake of ``store`` as it was at ``snapshot`` (default: its latest) into the new or
    empty folder ``dest`` (local, or in object storage), and return the manifest written there.

    Raises :class:`TransferRefusedError` (nothing written) when the lake does not exist, ``dest``
    is not empty, or the lake has no such snapshot or no crawl tables at it;
    :class:`~crawl_platform.store.errors.StoreUnavailableError` when a lake cannot be opened. On
    any failure what was written to ``dest`` is removed again, so a folder with a manifest is
    always a whole backup.
    """
    folder = as_folder(dest)
    if not store.exists():
        raise TransferRefusedError(f"there is no lake at {store.location.shown_catalog} to back up")
    local = folder.local_path
    if local is not None:
        if local.exists() and (not local.is_dir() or any(local.iterdir())):
            raise TransferRefusedError(f"the backup destination {local} exists and is not empty: name a new folder")
        created = not local.exists()
        local.mkdir(parents=True, exist_ok=True)
        try:
            manifest = _backup_into(store, local, folder.child(ARCHIVE), snapshot)
            folder.put_bytes(MANIFEST, manifest.to_json().encode())  # last, and whole: a manifest means a whole backup
        except BaseException:
            _empty(local, remove=created)
            raise
        return manifest
    if next(iter(folder.list()), None) is not None:
        raise TransferRefusedError(f"the backup destination {folder.url} is not empty: name a new folder")
    try:
        with tempfile.TemporaryDirectory(prefix="crawl-platform-backup-") as staging:
            built = Path(staging)
            manifest = _backup_into(store, built, folder.child(ARCHIVE), snapshot)
            for path in sorted(built.rglob("*")):
                if path.is_file() and not path.name.endswith((".wal", "-wal", "-shm", ".write.lock")):
                    folder.put_file(path.relative_to(built).as_posix(), path)
        folder.put_bytes(MANIFEST, manifest.to_json().encode())
    except BaseException:
        folder.delete_tree("")
        raise
    return manifest


def _backup_into(store: CrawlStore, lake_dir: Path, archive: Folder, snapshot: int | None) -> Manifest:
    """Write the backup's lake into the local folder ``lake_dir`` and its WARC files into
    ``archive``; the manifest to write last."""
    target = CrawlStore(backup_location(lake_dir), store.write_timeout_s)
    try:
        source = Source.lake(store.location, f"the lake {store.location.shown_catalog}")
        with write_transaction(target, source) as con:
            snapshot_id, snapshot_time = snapshot_to_copy(con, source.alias, snapshot)
            tables = copy_tables(con, {t: f"{source.alias}.main.{t} AT (VERSION => {snapshot_id})" for t in TABLES})
            warc_files = archive_files(con, f"{source.alias}.main.pages AT (VERSION => {snapshot_id})")
    finally:
        target.close()
    checkpoint_sqlite_catalog(lake_dir / "catalog.sqlite")  # the file alone is the catalog, for an upload
    _copy_archive(warc_files, store.archive, archive)
    return Manifest(snapshot_id, snapshot_time, _now(), store.location.shown_catalog, duckdb.__version__,
                    tables, len(warc_files))


def restore_lake(src: Folder | Path, target_location: LakeLocation, *, replace: bool = False,
                 archive: Folder | None = None) -> Manifest:
    """Land the backup in folder ``src`` (local, or in object storage) into the lake at
    ``target_location`` (created when missing) in one transaction, check every table against the
    manifest, and return it. The backup's WARC files are copied into ``archive`` (default: the
    target lake's) first.

    A target that already holds crawl data is refused with :class:`TransferRefusedError` unless
    ``replace``, which swaps its contents for the backup's (its earlier state stays reachable by
    time travel). Raises :class:`TransferRefusedError` for a folder that is not a whole backup,
    :class:`~crawl_platform.store.transfer.TransferFailedError` (nothing changed) when the
    backup's tables differ from its manifest or cannot be copied, and
    :class:`~crawl_platform.store.errors.StoreUnavailableError` when a lake cannot be opened.
    """
    folder = as_folder(src)
    manifest = Manifest.read(folder)
    local = folder.local_path
    if local is not None:
        return _restore_from(local, folder, manifest, target_location, replace, archive)
    with tempfile.TemporaryDirectory(prefix="crawl-platform-restore-") as staging:
        copy = Path(staging)
        for name in folder.list():
            if not name.startswith(f"{ARCHIVE}/") and name != MANIFEST:
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                folder.get_file(name, copy / name)
        return _restore_from(copy, folder, manifest, target_location, replace, archive)


def _restore_from(lake_dir: Path, folder: Folder, manifest: Manifest, target_location: LakeLocation,
                  replace: bool, archive: Folder | None) -> Manifest:
    """Restore the backup whose lake is in the local ``lake_dir`` (and WARC files in ``folder``)."""
    location = backup_location(lake_dir)
    if location.sqlite_path is None or not location.sqlite_path.exists():
        raise TransferRefusedError(f"{folder.url} has a manifest but no catalog.sqlite: the backup is incomplete")
    target = CrawlStore(target_location, archive=archive)
    backup_archive = folder.child(ARCHIVE)
    warc_files = sorted(name for name in backup_archive.list() if name.endswith(".warc.gz"))
    try:
        source = Source.lake(location, f"the backup in {folder.url}", moved=True)  # backups are copied around
        with write_transaction(target, source) as con:
            refuse_unless_empty(con, target_location.shown_catalog, replace)
            # Before the tables commit: no restored row points at a file not there yet.
            _copy_archive(warc_files, backup_archive, target.archive)
            landed = copy_tables(con, {t: f"{source.alias}.main.{t}" for t in TABLES})
            wrong = [t for t in TABLES if landed[t] != manifest.tables.get(t)]
            if wrong:
                raise TransferFailedError(f"the backup in {folder.url} does not match its manifest in "
                                          f"{', '.join(wrong)}: nothing was restored")
    finally:
        target.close()
    return manifest


def _copy_archive(files: list[str], src: Folder, dest: Folder) -> None:
    """Copy the WARC files (each appears whole at the destination); a file already at the
    destination is the same file (names are never reused) and is kept."""
    for name in files:
        if dest.exists(name):
            continue
        try:
            source = src.local_path
            if source is not None:
                dest.put_file(name, source / name)
                continue
            with tempfile.TemporaryDirectory(prefix="crawl-platform-warc-") as staging:
                copy = Path(staging) / "copy.warc.gz"
                src.get_file(name, copy)
                dest.put_file(name, copy)
        except FileNotFoundError:
            raise TransferFailedError(f"the archive file {src.url.rstrip('/')}/{name} that pages point into "
                                      "is missing") from None


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _empty(folder: Path, *, remove: bool) -> None:
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
