"""Settings of the store: the lake's catalog and data files, its DuckDB, backups, the raw archive
and Dagster's home.

Part of :class:`crawl_platform.config.Settings`; :mod:`crawl_platform.store` reads them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field
from pydantic_settings import BaseSettings

from crawl_platform.config.storage import folder_location

_MEMORY_SIZE = re.compile(r"\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)", re.IGNORECASE)


def _memory_size(value: str) -> str:
    """A size DuckDB reads, such as 256MB or 2GB (stripped), else a one-line error."""
    if not _MEMORY_SIZE.fullmatch(value.strip()):
        raise ValueError("a size such as 256MB or 2GB")
    return value.strip()


class LakeSettings(BaseSettings):
    """The lake (catalog, data path, DuckDB memory), its backups and retention, the raw archive."""

    lake_path: Path = Field(
        Path("data/lake"), validation_alias=AliasChoices("CRAWL_LAKE_PATH", "lake_path"),
        description="Folder of the embedded lake: its SQLite catalog `catalog.sqlite` and its Parquet "
        "files `data/`, unless `CRAWL_LAKE_CATALOG` or `CRAWL_LAKE_DATA_PATH` say otherwise. A relative "
        "path is taken from the working directory and made absolute (DuckLake keeps the data path a lake "
        "was made with, and refuses it spelt otherwise); a lake whose stored data path is relative still "
        "opens, from a folder whose absolute path ends with it.",
    )
    lake_catalog: str = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_CATALOG", "lake_catalog"), repr=False,
        description="The lake's catalog: empty for the embedded SQLite file under `CRAWL_LAKE_PATH`, "
        "`sqlite:PATH` for another file, or `postgres:DSN` (e.g. `postgres:dbname=crawl host=pg.internal "
        "user=crawler`) for a catalog every machine shares (docs/deployment.md). A password in the DSN is "
        "shown as `***`; `PGPASSWORD` or `~/.pgpass` keep it out of the DSN. TLS to PostgreSQL: add "
        "`sslmode=verify-full sslrootcert=/path/to/ca.pem` to the DSN; it reaches libpq untouched (both the "
        "DuckDB extension and the write lock's connection use it).",
    )
    lake_data_path: Annotated[str, BeforeValidator(folder_location)] = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_DATA_PATH", "lake_data_path"),
        description="Where the lake's Parquet files live: empty for `CRAWL_LAKE_PATH/data`, a folder every "
        "worker reaches (a shared mount), or object storage, `s3://bucket/prefix/` (DuckDB's `httpfs`, with "
        "the `AWS_*` settings; docs/storage.md).",
    )
    lake_write_timeout_s: float = Field(
        120.0, gt=0, validation_alias=AliasChoices("CRAWL_LAKE_WRITE_TIMEOUT", "lake_write_timeout_s"),
        description="Seconds a writer waits for the lake's write lock (writers take turns; readers "
        "never wait).",
    )
    lake_memory_limit: Annotated[str, AfterValidator(_memory_size)] = Field(
        "1GB",
        validation_alias=AliasChoices("CRAWL_LAKE_MEMORY_LIMIT", "lake_memory_limit"),
        description="DuckDB's memory limit in each process that opens the lake (`1GB`, `512MB`, ...): what "
        "a process keeps of the lake it read stays under it, and a query that needs more spills to a folder "
        "of the process's own under the system's temporary folder. DuckDB's own default, 80 % of the "
        "machine's memory, lets every run process keep what it read; a smaller limit than 1GB slows a "
        "large crawl (docs/benchmarks.md).",
    )
    lake_threads: int = Field(
        1, ge=0, le=256, validation_alias=AliasChoices("CRAWL_LAKE_THREADS", "lake_threads"),
        description="DuckDB threads in each process of the crawl that opens the lake: batch runs, "
        "sensors, the CLI (whose `crawl` and `status` always use one). The crawl's statements are small, "
        "and on them more threads cost more CPU than they save (docs/benchmarks.md). `0`: one per core, "
        "for a big machine whose runs scan a big lake. `crawl-platform sql` always uses one per core.",
    )
    lake_retention_days: int = Field(
        7, ge=0, validation_alias=AliasChoices("CRAWL_LAKE_RETENTION_DAYS", "lake_retention_days"),
        description="Days of snapshots `lake_maintenance` keeps for time travel (`AT (VERSION => n)`). "
        "Older snapshots are expired and the files only they referenced are removed; the cutoff is rounded "
        "back to a UTC midnight, so up to a day more is kept.",
    )
    lake_backup_path: Annotated[str, BeforeValidator(folder_location)] = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_BACKUP_PATH", "lake_backup_path"),
        description="Folder `lake_backup_job` writes backups into, one `<snapshot>-<UTC time>` folder each: a "
        "path or `s3://bucket/prefix/`; empty for `backups/` beside `CRAWL_LAKE_PATH`.",
    )
    archive_path: Annotated[str, BeforeValidator(folder_location)] = Field(
        "", validation_alias=AliasChoices("CRAWL_ARCHIVE_PATH", "archive_path"),
        description="Folder of the raw archive, the gzip WARC files the fetch steps write (`pages.warc_file` "
        "is relative to it): a path every worker reaches, or `s3://bucket/prefix/` (each shard's file "
        "uploaded in parts once complete, records read back by ranged reads; docs/storage.md). Empty: "
        "`archive/` beside a data path in object storage, else beside an embedded catalog (in "
        "`CRAWL_LAKE_PATH`), else beside the shared data path: never on one machine only when the lake is "
        "shared.",
    )
    archive_responses: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_ARCHIVE", "archive_responses"),
        description="Write every fetched response to the raw archive. `false`: `pages.warc_*` stay NULL, "
        "and `show`, `export --format warc` and re-extraction have nothing to read.",
    )
    dagster_home: Path = Field(
        Path("data/dagster_home"), validation_alias=AliasChoices("DAGSTER_HOME", "dagster_home"),
        description="Dagster instance directory. `crawl-platform up` writes a `dagster.yaml` there if there "
        "is none, and its logs go to `crawl-platform-logs/` in it.",
    )

    def lake_backup(self, name: str) -> str:
        """Where the backup ``name`` goes: into ``CRAWL_LAKE_BACKUP_PATH`` (a path or an
        ``s3://`` URL), or ``backups/`` beside the lake folder."""
        root = self.lake_backup_path.rstrip("/") if self.lake_backup_path else str(self.lake_path.parent / "backups")
        return f"{root}/{name}"
