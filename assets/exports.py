"""The ``exports`` asset: one crawl's tables (Parquet or JSON lines) or archive (WARC) written to a folder.

Materialised by hand from the UI or a job with its config (crawl id, format, folder, tables); it
depends on ``pages``, ``documents`` and ``links`` so the lineage shows what it reads. The work is
:func:`crawl_platform.archive.export.export_crawl` (the same as ``crawl-platform export``); this
module reads the config, calls it and reports each file with its row count as metadata. Bad
config (an unknown crawl, format or table, a folder that cannot be written) fails the run with
the engine's one-line error.
"""

from pathlib import Path

from dagster import AssetExecutionContext, Config, Failure, MaterializeResult, MetadataValue, asset
from pydantic import Field

from crawl_platform.archive.export import DEFAULT_TABLES, ExportError, export_crawl
from crawl_platform.archive.reader import ArchiveReadError
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class ExportConfig(Config):
    crawl_id: str = Field(description="The crawl to export.")
    format: str = Field("parquet", description="parquet, jsonl or warc.")
    to: str = Field(description="Folder to write into (created if missing).")
    tables: list[str] = Field(list(DEFAULT_TABLES), description="Tables to export (ignored for warc).")


@asset(deps=["pages", "documents", "links"], group_name="exports", code_version="1",
       description="One crawl's tables as Parquet or JSON lines, or its archived responses as WARC, "
       "in a folder (crawl id, format and folder in the run config).")
def exports(context: AssetExecutionContext, config: ExportConfig,
            crawl: CrawlSettingsResource) -> MaterializeResult[None]:
    done = {"step": ""}

    def progress(what: str, count: int, total: int) -> None:
        if what != done["step"]:
            done["step"] = what
            context.log.info(f"export {config.crawl_id}: {what} ({count}/{total})")

    try:
        files = export_crawl(crawl.store(), config.crawl_id, config.format, Path(config.to), config.tables, progress)
    except (ExportError, ArchiveReadError) as err:
        raise Failure(description=str(err)) from None
    return MaterializeResult(metadata={
        "crawl_id": config.crawl_id,
        "format": config.format,
        "dest": MetadataValue.path(config.to),
        "files": MetadataValue.json({str(f.path): f.rows for f in files}),
        "rows": sum(f.rows for f in files),
        **{f"rows_{f.table}": f.rows for f in files if f.table != "warc"},
    })
