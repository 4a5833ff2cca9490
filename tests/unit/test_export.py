"""``crawl-platform export``: a crawl's tables as Parquet or JSON lines that DuckDB reads back equal
to the lake's rows of that crawl (and only that crawl), its archive as WARC files warcio reads, and
one-line errors with exit 2 for bad input."""

from __future__ import annotations

import duckdb
import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl_platform.archive.export import export_crawl
from tests.sites.hostile import Reply
from tests.unit.archived import archive_site, cli, dead_url, fetch_and_land, one_line_error, register

CRAWL_ROWS = {
    "pages": "SELECT * FROM pages WHERE crawl_id = 'c1'",
    "documents": "SELECT d.* FROM documents d JOIN pages p USING (url, version) WHERE p.crawl_id = 'c1'",
    "links": "SELECT l.* FROM links l JOIN pages p ON p.url = l.src_url AND p.version = l.src_version "
             "WHERE p.crawl_id = 'c1'",
    "batch_items": "SELECT * FROM batch_items WHERE crawl_id = 'c1'",
    "frontier": "SELECT * FROM frontier WHERE crawl_id = 'c1'",
}


@pytest.fixture
def two_crawls(hostile, store):
    """Crawl c1 landed in two batches (one page changed in between), crawl c2 with a page of its own."""
    bodies = archive_site(hostile)
    urls = [*bodies, dead_url()]
    register(store, "c1", *urls)
    fetch_and_land(store, "c1", "b1", urls)
    hostile.static["/plain"] = Reply(200, b"<html><title>Plain 2</title><a href='/x'>x</a></html>")
    fetch_and_land(store, "c1", "b2", [hostile.url("/plain")])
    hostile.static["/other"] = Reply(200, b"<html><title>Other</title></html>")
    register(store, "c2", hostile.url("/other"))
    fetch_and_land(store, "c2", "b3", [hostile.url("/other")])
    return bodies


def _sorted(rows):
    return sorted(rows, key=repr)


def _lake_rows(store, table):
    with store.read() as con:
        return _sorted(con.execute(CRAWL_ROWS[table]).fetchall())


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_exported_tables_read_back_equal_to_the_crawls_rows(two_crawls, store_settings, store, tmp_path, fmt):
    dest = tmp_path / "out"
    tables = list(CRAWL_ROWS)
    done = cli(store_settings, "export", "c1", "--format", fmt, "--to", str(dest),
               *(arg for t in tables for arg in ("--table", t)))
    assert done.returncode == 0, done.stderr
    files = {t: dest / f"c1.{t}.{fmt}" for t in tables}
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in files.values())
    con = duckdb.connect()
    for table, path in files.items():
        expected = _lake_rows(store, table)
        assert expected, table  # every table has rows of c1, so equality means something
        if fmt == "parquet":
            got = con.execute(f"SELECT * FROM read_parquet('{path}')").fetchall()
        else:  # JSON has no types: read it with the lake table's column types
            with store.read() as lake:
                types = {name: kind for name, kind, *_ in lake.execute(f"DESCRIBE ({CRAWL_ROWS[table]})").fetchall()}
            columns = ", ".join(f"'{k}': '{v}'" for k, v in types.items())
            got = con.execute(f"SELECT * FROM read_json('{path}', columns = {{{columns}}})").fetchall()
        assert _sorted(got) == expected, table
        assert f"{path}: {len(expected)} rows" in done.stdout.decode()
    reader = "read_parquet" if fmt == "parquet" else "read_json"
    assert con.execute(f"SELECT DISTINCT crawl_id FROM {reader}('{files['pages']}')").fetchall() == [("c1",)]


def test_warc_export_holds_the_crawls_responses_for_warcio(hostile, two_crawls, store_settings, store, tmp_path):
    dest = tmp_path / "warc"
    done = cli(store_settings, "export", "c1", "--format", "warc", "--to", str(dest))
    assert done.returncode == 0, done.stderr
    (path,) = dest.iterdir()
    assert path.name == "c1-00000.warc.gz"
    with path.open("rb") as file:
        records = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
                   for r in ArchiveIterator(file)]
    assert records[0][0] == "warcinfo"
    responses = sorted((uri, body) for kind, uri, body in records if kind == "response")
    expected = sorted([*two_crawls.items(), (hostile.url("/plain"), b"<html><title>Plain 2</title>"
                                             b"<a href='/x'>x</a></html>")])
    assert responses == expected  # both versions of /plain, nothing of c2, nothing for the dead URL
    assert f"{path}: {len(expected)} records" in done.stdout.decode()


def test_export_reports_progress_per_table(two_crawls, store, tmp_path):
    seen = []
    files = export_crawl(store, "c1", "parquet", tmp_path / "p", ["pages", "links"],
                         lambda what, done, total: seen.append((what, done, total)))
    assert seen == [("pages", 0, 2), ("links", 1, 2), ("done", 2, 2)]
    assert [(f.table, f.rows) for f in files] == [("pages", len(_lake_rows(store, "pages"))),
                                                  ("links", len(_lake_rows(store, "links")))]


@pytest.mark.parametrize(("args", "message"), [
    (["nope", "--format", "parquet"], "no crawl 'nope' in the lake"),
    (["c1", "--format", "csv"], "unknown export format 'csv' (one of parquet, jsonl, warc)"),
    (["c1", "--format", "jsonl", "--table", "hosts"], "table 'hosts' has no crawl_id column; tables with a"),
    (["c1", "--format", "jsonl", "--table", "nothing"], "table 'nothing' is not a lake table"),
])
def test_export_bad_input_is_one_line_exit_2(two_crawls, store_settings, store, tmp_path, args, message):
    dest = tmp_path / "out"
    done = cli(store_settings, "export", *args, "--to", str(dest))
    assert done.returncode == 2
    assert message in one_line_error(done)
    assert not dest.exists()  # nothing written


def test_export_into_an_unwritable_folder_is_one_line_exit_2(two_crawls, store_settings, store, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = cli(store_settings, "export", "c1", "--format", "parquet", "--to", str(blocker / "out"))
    assert done.returncode == 2
    assert one_line_error(done).startswith(f"crawl-platform: cannot create {blocker / 'out'}: ")
