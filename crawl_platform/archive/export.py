"""Exports one crawl's data to files other tools read: its tables as Parquet or JSON lines, its archive as WARC.

:func:`export_crawl` is what ``crawl-platform export`` and the Dagster asset ``exports`` run. Tables
are copied by DuckDB (``COPY (SELECT …) TO …``), all read in one transaction, so the files agree
with each other at one lake snapshot while crawls keep landing. A crawl's rows are those of its
page versions (``pages.crawl_id``) and what hangs off them (``documents``, ``links`` by URL and
version), plus its ``crawls``, ``frontier`` and ``batch_items`` rows; any other lake table with a
``crawl_id`` column exports its rows of the crawl. The WARC export copies the crawl's stored
response records (:mod:`crawl_platform.archive.reader`) byte for byte into new WARC files of at
most :data:`WARC_FILE_BYTES`, each starting with a ``warcinfo`` record. Every file is written
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
from crawl_platform.store.database import CrawlStore

FORMATS = ("parquet", "jsonl", "warc")
DEFAULT_TABLES = ("pages", "documents", "links")
WARC_FILE_BYTES = 1 << 30  # Common Crawl's WARC files are about this size
_CRAWL_ROWS = {
    "pages": "SELECT * FROM pages WHERE crawl_id = $crawl",
    "documents": """SELECT d.* FROM documents d JOIN pages p USING (url, version) WHERE p.crawl_id = $crawl""",
    "links": """SELECT l.* FROM links l JOIN pages p ON p.url = l.src_url AND p.version = l.src_version
                WHERE p.crawl_id = $crawl""",
}
_COPY_OPTIONS = {"parquet": "FORMAT parquet, COMPRESSION zstd", "jsonl": "FORMAT json"}
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
        if not con.execute("SELECT count(*) FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchone()[0]:  # type: ignore[index]
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
            quoted = str(part).replace("'", "''")
            rows = con.execute(f"COPY ({sql}) TO '{quoted}' ({_COPY_OPTIONS[fmt]})", {"crawl": crawl_id}).fetchone()
            os.replace(part, path)
            done.append(ExportedFile(path, table, int(rows[0]) if rows else 0))
        report("done", len(queries), len(queries))
    return done


def _crawl_rows(con: Any, table: str) -> str:
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
        raise ExportError(f"table {table!r} {what}; tables with a crawl's rows: {', '.join(known)}")
    return f'SELECT * FROM "{table}" WHERE crawl_id = $crawl'


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
                    done.append(ExportedFile(warc.path, "warc", rows))
                warc = WarcFile(dest, f"{stem}-{len(done):05d}.warc.gz", {"isPartOf": crawl_id})
                rows = 0
            warc.copy(member)
            rows += 1
            if index % 100 == 0:
                report("warc", index, total)
        if warc is not None:
            warc.commit()
            done.append(ExportedFile(warc.path, "warc", rows))
    except BaseException:
        if warc is not None:
            warc.discard()
        raise
    report("done", total, total)
    return done
