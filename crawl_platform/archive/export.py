"""Exports one crawl's data to files other tools read: its tables as Parquet or JSON lines, its archive as WARC.

:func:`export_crawl` is what ``crawl-platform export`` and the Dagster asset ``exports`` run. Tables
are copied by DuckDB (``COPY (SELECT …) TO …``, :mod:`crawl_platform.store.exports`), all read in
one transaction, so the files agree with each other at one lake snapshot while crawls keep landing.
A crawl's rows are those of its page versions (``pages.crawl_id``) and what hangs off them
(``documents``, ``links`` by URL and version), plus its ``crawls``, ``frontier`` and
``batch_items`` rows; any other lake table with a ``crawl_id`` column exports its rows of the crawl.
The WARC export copies the crawl's stored response records (:mod:`crawl_platform.archive.reader`)
byte for byte into new WARC files of at most :data:`WARC_FILE_BYTES`, each starting with a
``warcinfo`` record. Every file is written
under a temporary name and renamed when complete, so a failed export leaves no partial file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawl_platform.archive.reader import archived_records, count_archived
from crawl_platform.archive.writer import WarcFile
from crawl_platform.storage import LocalFolder
from crawl_platform.store import crawls, exports
from crawl_platform.store.database import CrawlStore

FORMATS = ("parquet", "jsonl", "warc")
DEFAULT_TABLES = ("pages", "documents", "links")
WARC_FILE_BYTES = 1 << 30  # Common Crawl's WARC files are about this size
_UNSAFE = re.compile(r"[^A-Za-z0-9.+=_-]")

Progress = Callable[[str, int, int], None]  # (what, done, total): called as the export goes


class ExportError(Exception):
    """Bad input (unknown crawl, format or table; a destination that cannot be written);
    ``str(err)`` is one line, and nothing was written."""


@dataclass(frozen=True)
class ExportedFile:
    path: Path
    table: str  # the table, or "warc" for archive records
    rows: int


def export_crawl(store: CrawlStore, crawl_id: str, fmt: str, dest: Path,
                 tables: Sequence[str] = DEFAULT_TABLES, progress: Progress | None = None) -> list[ExportedFile]:
    """Write the crawl's ``tables`` (or, for ``warc``, its archived responses) into ``dest``
    (created if missing), named ``<crawl>.<table>.parquet`` / ``.jsonl`` or
    ``<crawl>-00000.warc.gz``; the files written. Raises :class:`ExportError` on bad input."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
    with store.read() as con:
        if not crawls.is_registered(con, crawl_id):
            raise ExportError(f"no crawl {crawl_id!r} in the lake")
        queries = {} if fmt == "warc" else {t: _crawl_rows(con, t) for t in dict.fromkeys(tables)}
    _writable(dest)
    report = progress or (lambda _what, _done, _total: None)
    stem = _UNSAFE.sub("_", crawl_id)
    if fmt == "warc":
        return _export_warc(store, crawl_id, dest, stem, report)
    done: list[ExportedFile] = []
    with store.read() as con:  # one transaction: every table at the same snapshot
        for index, (table, sql) in enumerate(queries.items()):
            report(table, index, len(queries))
            path = dest / f"{stem}.{table}.{fmt}"
            part = path.with_name(path.name + ".part")
            rows = exports.copy_rows(con, sql, crawl_id, part, fmt)
            os.replace(part, path)
            done.append(ExportedFile(path, table, rows))
        report("done", len(queries), len(queries))
    return done


def _crawl_rows(con: Any, table: str) -> str:
    try:
        return exports.crawl_rows(con, table)
    except exports.NoCrawlRowsError as err:
        raise ExportError(str(err)) from None


def _writable(dest: Path) -> None:
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExportError(f"cannot create {dest}: {err.strerror or err}") from None
    if not os.access(dest, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write into {dest}: permission denied")


def _export_warc(store: CrawlStore, crawl_id: str, dest: Path, stem: str, report: Progress) -> list[ExportedFile]:
    total = count_archived(store, crawl_id)
    done: list[ExportedFile] = []
    warc: WarcFile | None = None
    rows = 0
    try:
        for index, (_url, _version, member) in enumerate(archived_records(store, crawl_id)):
            if warc is None or warc.size + len(member) > WARC_FILE_BYTES:
                if warc is not None:
                    warc.commit()
                    done.append(ExportedFile(dest / warc.name, "warc", rows))
                warc = WarcFile(LocalFolder(dest), f"{stem}-{len(done):05d}.warc.gz", {"isPartOf": crawl_id})
                rows = 0
            warc.copy(member)
            rows += 1
            if index % 100 == 0:
                report("warc", index, total)
        if warc is not None:
            warc.commit()
            done.append(ExportedFile(dest / warc.name, "warc", rows))
    except BaseException:
        if warc is not None:
            warc.discard()
        raise
    report("done", total, total)
    return done
