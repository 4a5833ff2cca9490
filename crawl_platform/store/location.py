"""Where a lake lives: its catalog and its data path, and the ``ATTACH`` that opens it in DuckDB.

:class:`LakeLocation` is what :class:`crawl_platform.store.database.CrawlStore`, the lake commands
(console, backup, copy) and any DuckDB client need to find a lake; it opens nothing itself. A
PostgreSQL catalog's connection string may hold a password: the location is shown only as
:attr:`LakeLocation.shown_catalog`, and an error that may echo the connection string (DuckDB's do)
passes through :meth:`LakeLocation.scrub` (:mod:`crawl_platform.redaction`).

A data path in object storage (``s3://bucket/prefix/``) comes with the
:class:`~crawl_platform.storage.ObjectStore` that reaches it; :meth:`LakeLocation.object_storage_sql`
gives the DuckDB settings and secret a connection needs before it attaches such a lake. They hold
the store's key: they are run, never shown.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from crawl_platform.config import Settings
from crawl_platform.redaction import passwords, redact_passwords, scrub
from crawl_platform.storage import Folder, ObjectStore, is_object_url, open_folder
from crawl_platform.storage.s3 import split_s3_url

LAKE = "lake"  # the name a client attaches the lake under (docs/operations.md, `crawl-platform sql`)


_STORED_DATA_PATH = re.compile(r'does not match existing data path in the catalog "([^"]*)"')


@dataclass(frozen=True, repr=False)
class LakeLocation:
    """Where a lake lives: its catalog (``sqlite:PATH`` or ``postgres:DSN``) and its data path."""

    catalog: str  # used to connect, never shown: see shown_catalog
    data_path: str
    object_store: ObjectStore | None = None  # reaches s3:// data and archive paths (None: boto3's defaults)

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
        elif not is_object_url(data):
            raise ValueError(f"CRAWL_LAKE_DATA_PATH {data!r}: a local path or s3://bucket/prefix/")
        return cls(catalog, data.rstrip("/") + "/", ObjectStore.from_settings(settings))

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

    def default_archive(self) -> str:
        """Where the raw archive is when ``CRAWL_ARCHIVE_PATH`` is unset: ``archive/`` beside a data
        path in object storage (so every machine reaches it, as it reaches the Parquet files),
        else beside an embedded catalog, else beside the (shared) local data path. Never inside the
        data path: lake maintenance removes every file there that the catalog does not know."""
        if not self.is_local:
            bucket, prefix = split_s3_url(self.data_path)
            parent = prefix.rstrip("/").rpartition("/")[0]
            if not prefix:
                raise ValueError(f"the lake's data path {self.data_path} is a bucket's root: set CRAWL_ARCHIVE_PATH "
                                 "(the archive cannot sit beside it)")
            return f"s3://{bucket}/{parent + '/' if parent else ''}archive/"
        if self.sqlite_path is not None:
            return str(self.sqlite_path.parent / "archive")
        return str(Path(self.data_path.rstrip("/")).parent / "archive")

    def archive_folder(self, archive_path: str = "") -> Folder:
        """The raw archive's folder: ``archive_path`` (``CRAWL_ARCHIVE_PATH``) or the default."""
        return open_folder(archive_path or self.default_archive(), self.object_store)

    def object_storage_sql(self) -> list[str]:
        """What a DuckDB connection (with ``httpfs`` loaded) runs before it attaches this lake: the
        server's certificate checked (against ``AWS_CA_BUNDLE`` if set) and a secret scoped to the
        data path's bucket. Empty for a local data path. Holds the key: run it, never show it."""
        if self.is_local:
            return []
        store = self.object_store or ObjectStore()
        bucket, _prefix = split_s3_url(self.data_path)
        statements = ["SET GLOBAL enable_server_cert_verification = true"]
        if store.ca_bundle:
            statements.append(f"SET GLOBAL ca_cert_file = '{_quote(store.ca_bundle)}'")
        options = ["TYPE s3", f"SCOPE 's3://{_quote(bucket)}'",
                   f"URL_STYLE '{'path' if store.path_style else 'vhost'}'",
                   f"USE_SSL {'true' if store.use_ssl else 'false'}"]
        if store.endpoint_url:
            options.append(f"ENDPOINT '{_quote(store.endpoint_host)}'")
        if store.region:
            options.append(f"REGION '{_quote(store.region)}'")
        if store.access_key_id:
            options += [f"KEY_ID '{_quote(store.access_key_id)}'", f"SECRET '{_quote(store.secret_access_key)}'"]
        if store.session_token:
            options.append(f"SESSION_TOKEN '{_quote(store.session_token)}'")
        name = "crawl_platform_s3_" + hashlib.sha256(bucket.encode()).hexdigest()[:12]
        statements.append(f"CREATE OR REPLACE SECRET {name} ({', '.join(options)})")
        return statements

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
