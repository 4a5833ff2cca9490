"""Where a lake lives: its catalog and its data path, and the ``ATTACH`` that opens it in DuckDB.

:class:`LakeLocation` is what :class:`crawl_platform.store.database.CrawlStore`, the lake commands
(console, backup, copy) and any DuckDB client need to find a lake; it opens nothing itself. A
PostgreSQL catalog's connection string may hold a password: the location is shown only as
:attr:`LakeLocation.shown_catalog`, and an error that may echo the connection string (DuckDB's do)
passes through :meth:`LakeLocation.scrub` (:mod:`crawl_platform.redaction`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from crawl_platform.config import Settings
from crawl_platform.redaction import passwords, redact_passwords, scrub

LAKE = "lake"  # the name a client attaches the lake under (docs/operations.md, `crawl-platform sql`)


_STORED_DATA_PATH = re.compile(r'does not match existing data path in the catalog "([^"]*)"')


@dataclass(frozen=True, repr=False)
class LakeLocation:
    """Where a lake lives: its catalog (``sqlite:PATH`` or ``postgres:DSN``) and its data path."""

    catalog: str  # used to connect, never shown: see shown_catalog
    data_path: str

    def __repr__(self) -> str:
        return f"LakeLocation({self.shown_catalog!r}, {self.data_path!r})"

    @classmethod
    def from_settings(cls, settings: Settings) -> LakeLocation:
        """Local paths made absolute: DuckLake keeps the data path a lake was created with and
        refuses another spelling of it, so ``up`` (which resolves its paths for its processes) and
        a CLI started in the same folder must name it alike."""
        root = settings.lake_path.resolve()
        catalog = settings.lake_catalog or f"sqlite:{root / 'catalog.sqlite'}"
        data = settings.lake_data_path or str(root / "data")
        if "://" not in data:
            data = str(Path(data).resolve())
        return cls(catalog, data.rstrip("/") + "/")

    @property
    def shown_catalog(self) -> str:
        """The catalog as errors, logs, run metadata, backups and the command line show it: a
        PostgreSQL catalog's password as ``***`` (libpq reads it from ``PGPASSWORD`` or a
        ``.pgpass`` file as well, where it is never in the connection string)."""
        return redact_passwords(self.catalog)

    def scrub(self, text: str) -> str:
        """``text``, an error of DuckDB or of the PostgreSQL driver about this lake, without the
        catalog's password (DuckDB repeats the whole connection string in its errors); as it is
        when the catalog holds none."""
        secrets = passwords(self.catalog)
        if not secrets:
            return text
        return scrub(text.replace(self.catalog, self.shown_catalog), secrets)

    @property
    def kind(self) -> str:
        return self.catalog.split(":", 1)[0]

    @property
    def sqlite_path(self) -> Path | None:
        return Path(self.catalog.split(":", 1)[1]) if self.kind == "sqlite" else None

    def catalog_files_state(self) -> tuple[tuple[int, int, int] | None, ...] | None:
        """What changes at every commit to an embedded catalog, for the price of two ``stat``
        calls: the times, sizes and inodes of the SQLite file and its write-ahead log (WAL mode,
        where a commit appends to the log and a checkpoint rewrites the file; readers touch
        neither). None for a shared catalog: ask the lake for its snapshot instead."""
        path = self.sqlite_path
        if path is None:
            return None
        states: list[tuple[int, int, int] | None] = []
        for file in (path, path.with_name(path.name + "-wal")):
            try:
                st = file.stat()
            except FileNotFoundError:
                states.append(None)
            else:
                states.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(states)

    @property
    def is_local(self) -> bool:
        return "://" not in self.data_path

    def same_data_path(self, attach_error: str) -> bool:
        """Whether ``attach_error`` is DuckLake refusing this data path for one the catalog holds
        that names the same local folder: spelt otherwise, or relative (to the working directory
        of whoever created the lake, unknown here) and the end of this one."""
        stored = _STORED_DATA_PATH.search(attach_error)
        if stored is None or not self.is_local or "://" in stored.group(1):
            return False
        theirs, ours = Path(stored.group(1)), Path(self.data_path).resolve()
        if theirs.is_absolute():
            return theirs.resolve() == ours
        parts = [p for p in theirs.parts if p != "."]
        return ".." not in parts and bool(parts) and list(ours.parts[-len(parts):]) == parts

    def default_archive_root(self) -> Path:
        """``archive/`` beside an embedded catalog, else beside a local data path (the raw archive
        is plain files: a lake whose data lives in object storage names a local CRAWL_ARCHIVE_PATH)."""
        if self.sqlite_path is not None:
            return self.sqlite_path.parent / "archive"
        return Path(self.data_path.rstrip("/")).parent / "archive"

    def attach_sql(self, read_only: bool = False, alias: str = LAKE, override_data_path: bool = False) -> str:
        """The ``ATTACH`` statement that opens this lake in any DuckDB client (``override_data_path``:
        the catalog's data path is this one spelt another way, see :meth:`same_data_path`)."""
        options = [f"DATA_PATH '{_quote(self.data_path)}'"]
        if read_only:
            options.append("READ_ONLY")
        if override_data_path:
            options.append("OVERRIDE_DATA_PATH TRUE")
        return f"ATTACH 'ducklake:{_quote(self.catalog)}' AS {alias} ({', '.join(options)})"


def _quote(text: str) -> str:
    return text.replace("'", "''")
