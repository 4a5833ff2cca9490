"""The ``exports`` asset: materialised with a crawl id, format and folder, it writes the crawl's
tables (read back by DuckDB equal to the lake's rows) or its WARC records, and reports each file
and its row count; a bad crawl fails the run with the one-line reason."""

import duckdb
import pytest
from dagster import materialize
from warcio.archiveiterator import ArchiveIterator

from crawl_platform_dagster.assets.exports import exports
from tests.dagster.conftest import RESOURCES
from tests.sites.hostile import HostileSite
from tests.unit.archived import archive_site, fetch_and_land, register


@pytest.fixture
def landed(store_settings, store, monkeypatch):
    """Crawl c1 of the archive site landed, with the archive on; the lake named in the environment."""
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(store_settings.lake_path))
    with HostileSite() as site:
        bodies = archive_site(site)
        register(store, "c1", *bodies)
        fetch_and_land(store, "c1", "b1", list(bodies))
    return bodies


def _run(instance, **config):
    return materialize([exports], instance=instance, resources=RESOURCES, raise_on_error=False,
                       run_config={"ops": {"exports": {"config": config}}})


def test_exports_asset_writes_parquet_and_reports_files_and_rows(landed, store, instance, tmp_path):
    dest = tmp_path / "exports"
    result = _run(instance, crawl_id="c1", format="parquet", to=str(dest), tables=["pages", "documents"])
    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("exports")[0].metadata.items()}
    pages = store.query("SELECT * FROM pages WHERE crawl_id = 'c1' ORDER BY url")
    docs = store.query("SELECT d.* FROM documents d JOIN pages p USING (url, version) WHERE p.crawl_id = 'c1' "
                       "ORDER BY url")
    assert meta["files"] == {str(dest / "c1.pages.parquet"): len(pages), str(dest / "c1.documents.parquet"): len(docs)}
    assert (meta["rows_pages"], meta["rows_documents"], meta["rows"]) == (len(pages), len(docs), len(pages) + len(docs))
    con = duckdb.connect()
    assert con.execute(f"SELECT * FROM read_parquet('{dest / 'c1.pages.parquet'}') ORDER BY url").fetchall() == pages


def test_exports_asset_writes_warc(landed, instance, tmp_path):
    dest = tmp_path / "warc"
    result = _run(instance, crawl_id="c1", format="warc", to=str(dest))
    assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("exports")[0].metadata.items()}
    assert meta["files"] == {str(dest / "c1-00000.warc.gz"): len(landed)}
    with (dest / "c1-00000.warc.gz").open("rb") as file:
        bodies = {r.rec_headers.get_header("WARC-Target-URI"): r.content_stream().read()
                  for r in ArchiveIterator(file) if r.rec_type == "response"}
    assert bodies == landed


def test_exports_asset_fails_on_an_unknown_crawl(landed, instance, tmp_path):
    result = _run(instance, crawl_id="nope", format="parquet", to=str(tmp_path / "x"))
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "no crawl 'nope' in the lake" in failure.event_specific_data.error.message
