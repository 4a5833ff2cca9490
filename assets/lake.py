"""The lake's upkeep in the Dagster UI: the ``lake_maintenance`` asset and its job, and ``lake_backup_job``.

``lake_maintenance`` (group ``lake``) runs :func:`crawl_platform.store.maintenance.maintain_lake`
and reports the lake's files, bytes and snapshots before and after, which the UI plots over its
materialisations; the schedule ``lake_maintenance_daily`` (``sensors/lake.py``) runs its job. It is
a writer, so it takes the ``crawl_duckdb_writer`` pool like the landing steps: they wait for a
slot in Dagster instead of on the lake's lock. ``lake_backup_job`` copies the lake at its latest
snapshot with :func:`crawl_platform.lake.backup.backup_lake` (another engine module) and reports
the manifest; it only reads, so it takes no pool. The work is the engine's; this module reads
config, calls it and reports.
"""

from datetime import UTC, datetime, timedelta

from dagster import (
    AssetExecutionContext,
    AssetSelection,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    Output,
    asset,
    define_asset_job,
    in_process_executor,
    job,
    op,
)
from pydantic import Field

from crawl_platform.lake.backup import backup_lake
from crawl_platform.storage import ObjectStore, open_folder
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.store.maintenance import READER_GRACE, maintain_lake
from crawl_platform.store.transfer import TransferFailedError, TransferRefusedError
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class LakeMaintenanceConfig(Config):
    reader_grace_minutes: int = Field(
        int(READER_GRACE.total_seconds() // 60), ge=0,
        description="Files no snapshot references any more are removed once unreferenced this long "
        "(a read that started earlier may still scan them); rounded back to a UTC midnight unless 0.")


@asset(group_name="lake", code_version="1", pool=DUCKDB_WRITER_POOL, kinds={"ducklake"},
       description="The lake's storage kept lean: small files merged, snapshots older than "
       "CRAWL_LAKE_RETENTION_DAYS expired, unreferenced files removed.")
def lake_maintenance(context: AssetExecutionContext, config: LakeMaintenanceConfig,
                     crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    settings = crawl.settings()
    try:
        report = maintain_lake(crawl.store(), timedelta(days=settings.lake_retention_days),
                               timedelta(minutes=config.reader_grace_minutes))
    except (StoreBusyError, StoreUnavailableError) as err:
        raise Failure(description=str(err)) from None
    before, after = report.before, report.after
    context.log.info(f"{before.data_files} -> {after.data_files} files, {report.snapshots_expired} snapshots "
                     f"expired, {report.files_removed} files removed in {report.seconds:.1f}s")
    return MaterializeResult(metadata={
        "data_files_before": before.data_files,
        "data_files_after": after.data_files,
        "bytes_before": before.bytes,
        "bytes_after": after.bytes,
        "current_files_before": before.current_files,
        "current_files_after": after.current_files,
        "snapshots_before": before.snapshots,
        "snapshots_after": after.snapshots,
        "snapshots_expired": report.snapshots_expired,
        "files_merged": report.files_merged,
        "files_removed": report.files_removed,
        "files_awaiting_removal": after.awaiting_removal,
        "rows_flushed": report.rows_flushed,
        "retention_days": settings.lake_retention_days,
        "seconds": round(report.seconds, 2),
    })


lake_maintenance_job = define_asset_job(
    "lake_maintenance_job",
    selection=AssetSelection.assets(lake_maintenance),
    executor_def=in_process_executor,
    description="Compact the lake, expire old snapshots, remove unreferenced files.",
)


class LakeBackupConfig(Config):
    dest: str = Field("", description="New or empty folder for the backup. Empty: "
                      "<CRAWL_LAKE_BACKUP_PATH>/<snapshot>-<UTC time> (backups/ beside CRAWL_LAKE_PATH by default).")


@op(description="Copy the lake at its latest snapshot into a backup folder; the manifest is the metadata.")
def lake_backup(context: OpExecutionContext, config: LakeBackupConfig, crawl: CrawlSettingsResource) -> Output[str]:
    settings = crawl.settings()
    store = crawl.store()
    try:
        snapshot = store.snapshot_id()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        dest = config.dest or settings.lake_backup(f"{snapshot}-{stamp}")
        manifest = backup_lake(store, open_folder(dest, ObjectStore.from_settings(settings)), snapshot=snapshot)
    except (TransferRefusedError, TransferFailedError, StoreUnavailableError) as err:
        raise Failure(description=str(err)) from None
    context.log.info(f"backed up snapshot {manifest.snapshot_id} to {dest}")
    return Output(dest, metadata={
        "dest": MetadataValue.path(dest),
        "snapshot_id": manifest.snapshot_id,
        "snapshot_time": manifest.snapshot_time,
        "created_at": manifest.created_at,
        "source": manifest.source,
        "rows": sum(t.rows for t in manifest.tables.values()),
        "archive_files": manifest.archive_files,
        **{f"rows_{name}": t.rows for name, t in manifest.tables.items()},
        "tables": MetadataValue.json({name: {"rows": t.rows, "digest": t.digest}
                                      for name, t in manifest.tables.items()}),
    })


@job(executor_def=in_process_executor,
     description="Back up the lake at its latest snapshot (destination in the run config, or the default).")
def lake_backup_job() -> None:
    lake_backup()
