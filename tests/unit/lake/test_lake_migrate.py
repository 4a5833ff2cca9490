"""``crawl-platform migrate``: an old single-file store (``crawl.duckdb``) imported into the lake,
every table's rows there afterwards, and a refusal (a lake that holds crawls, a missing or foreign
file) as one line and exit 2 with nothing written.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from crawl_platform.store.database import CrawlStore
from tests.unit.lake.lake_cli import land_pages, run

# --- migrate -------------------------------------------------------------------------------------

# The old store's schema (crawl_platform/schema.sql before the lake): PRIMARY KEYs, hosts.host,
# and the columns later releases added by ALTER (a file from the first release lacks them).
OLD_SCHEMA = """
CREATE TABLE crawls (crawl_id VARCHAR PRIMARY KEY, seeds VARCHAR[] NOT NULL, scope VARCHAR NOT NULL,
    max_pages INTEGER NOT NULL, max_depth INTEGER NOT NULL, submitted_at TIMESTAMP NOT NULL,
    registered_at TIMESTAMP NOT NULL);
CREATE TABLE frontier (url VARCHAR NOT NULL, crawl_id VARCHAR NOT NULL, depth INTEGER NOT NULL,
    state VARCHAR NOT NULL, discovered_at TIMESTAMP NOT NULL, host VARCHAR NOT NULL,
    updated_at TIMESTAMP NOT NULL, batch_id VARCHAR, PRIMARY KEY (crawl_id, url));
CREATE TABLE pages (url VARCHAR NOT NULL, crawl_id VARCHAR NOT NULL, version INTEGER NOT NULL, status INTEGER,
    fetched_at TIMESTAMP NOT NULL, content_hash VARCHAR NOT NULL, content_type VARCHAR, final_url VARCHAR,
    batch_id VARCHAR NOT NULL, error VARCHAR, content_length BIGINT NOT NULL, elapsed_ms DOUBLE NOT NULL,
    PRIMARY KEY (url, version));
CREATE TABLE documents (url VARCHAR NOT NULL, version INTEGER NOT NULL, title VARCHAR, text VARCHAR NOT NULL,
    PRIMARY KEY (url, version));
CREATE TABLE links (src_url VARCHAR NOT NULL, src_version INTEGER NOT NULL, dst_url VARCHAR NOT NULL,
    anchor_text VARCHAR NOT NULL);
CREATE TABLE batch_items (batch_id VARCHAR NOT NULL, crawl_id VARCHAR NOT NULL, url VARCHAR NOT NULL,
    depth INTEGER NOT NULL, outcome VARCHAR NOT NULL, PRIMARY KEY (batch_id, crawl_id, url));
"""
OLD_HOSTS = """
CREATE TABLE hosts (host VARCHAR PRIMARY KEY, robots_status INTEGER, robots_body VARCHAR,
    robots_fetched_at TIMESTAMP, delay_ms INTEGER, updated_at TIMESTAMP NOT NULL);
"""
OLD_ADDED_COLUMNS = """
ALTER TABLE pages ADD COLUMN etag VARCHAR;
ALTER TABLE pages ADD COLUMN last_modified VARCHAR;
ALTER TABLE pages ADD COLUMN redirect_chain VARCHAR[];
ALTER TABLE pages ADD COLUMN charset VARCHAR;
ALTER TABLE crawls ADD COLUMN allow_patterns VARCHAR[];
ALTER TABLE crawls ADD COLUMN deny_patterns VARCHAR[];
ALTER TABLE crawls ADD COLUMN max_pages_per_host INTEGER;
ALTER TABLE crawls ADD COLUMN user_agent VARCHAR;
ALTER TABLE crawls ADD COLUMN use_sitemaps BOOLEAN;
"""
OLD_URL = "http://old.example/"
HASH = "ab" * 32


def old_store(path: Path, *, first_release: bool = False) -> Path:
    """An old-format ``crawl.duckdb``: one crawl, two page versions, their documents and links, a
    frontier row, a batch item and (after the first release) a hosts row under ``host``."""
    con = duckdb.connect(str(path))
    con.execute(OLD_SCHEMA if first_release else OLD_SCHEMA + OLD_HOSTS + OLD_ADDED_COLUMNS)
    con.execute("INSERT INTO crawls (crawl_id, seeds, scope, max_pages, max_depth, submitted_at, registered_at) "
                "VALUES ('old-1', [?], 'host', 50, 3, '2024-05-01 10:00:00', '2024-05-01 10:00:01')", [OLD_URL])
    con.execute("INSERT INTO frontier VALUES (?, 'old-1', 0, 'fetched', '2024-05-01 10:00:01', 'old.example', "
                "'2024-05-01 10:00:05', 'b-old')", [OLD_URL])
    for version in (1, 2):
        con.execute("INSERT INTO pages (url, crawl_id, version, status, fetched_at, content_hash, content_type, "
                    "final_url, batch_id, error, content_length, elapsed_ms) VALUES (?, 'old-1', ?, 200, "
                    "'2024-05-01 10:00:05', ?, 'text/html', ?, 'b-old', NULL, 120, 8.5)",
                    [OLD_URL, version, HASH, OLD_URL])
        con.execute("INSERT INTO documents VALUES (?, ?, 'Old', 'old text')", [OLD_URL, version])
        con.execute("INSERT INTO links VALUES (?, ?, 'http://old.example/next', 'next')", [OLD_URL, version])
    con.execute("INSERT INTO batch_items VALUES ('b-old', 'old-1', ?, 0, 'fetched')", [OLD_URL])
    if not first_release:
        con.execute("UPDATE pages SET etag = '\"v2\"', charset = 'utf-8' WHERE version = 2")
        con.execute("INSERT INTO hosts VALUES ('http://old.example', 200, 'User-agent: *', "
                    "'2024-05-01 10:00:02', 300, '2024-05-01 10:00:05')")
    con.close()
    return path


@pytest.mark.parametrize("first_release", [False, True])
def test_migrate_imports_every_table_of_an_old_store(lake_env, tmp_path, capsys, first_release):
    path = old_store(tmp_path / "crawl.duckdb", first_release=first_release)
    code, out, err = run(capsys, "migrate", str(path))
    assert (code, err) == (0, [])
    hosts = 0 if first_release else 1
    assert out.splitlines() == [f"imported {path} into sqlite:{lake_env.lake_path / 'catalog.sqlite'}: crawls 1, "
                                f"frontier 1, pages 2, documents 2, links 2, batch_items 1, hosts {hosts}, "
                                "page_event_batches 0, batch_ranges 0, crawl_schedules 0, revisits 0, records 0, "
                                "record_pages 0, near_duplicates 0, documents_markdown 0 rows"]
    lake = CrawlStore.from_settings(lake_env)
    assert lake.query("SELECT crawl_id, seeds, max_pages, user_agent, use_sitemaps FROM crawls") == [
        ("old-1", [OLD_URL], 50, None, None)]
    pages = "SELECT url, version, content_hash, etag, charset, redirect_chain FROM pages ORDER BY version"
    assert lake.query(pages) == [
        (OLD_URL, 1, HASH, None, None, None),
        (OLD_URL, 2, HASH, None if first_release else '"v2"', None if first_release else "utf-8", None)]
    assert lake.query("SELECT url, version, title FROM documents ORDER BY version") == [
        (OLD_URL, 1, "Old"), (OLD_URL, 2, "Old")]
    assert lake.query("SELECT src_version, dst_url FROM links ORDER BY ALL") == [
        (1, "http://old.example/next"), (2, "http://old.example/next")]
    assert lake.query("SELECT url, state, host, batch_id FROM frontier") == [
        (OLD_URL, "fetched", "old.example", "b-old")]
    assert lake.query("SELECT batch_id, outcome FROM batch_items") == [("b-old", "fetched")]
    expected_hosts = [] if first_release else [("http://old.example", 200, "User-agent: *", 300)]
    assert lake.query("SELECT origin, robots_status, robots_body, delay_ms FROM hosts") == expected_hosts


def test_migrate_refuses_a_lake_that_holds_crawls_unless_force(lake_env, store, frontier, tmp_path, capsys):
    land_pages(store, frontier, "new-1", "b1", ["/a"])
    before = store.snapshot_id()
    path = old_store(tmp_path / "crawl.duckdb")
    code, out, err = run(capsys, "migrate", str(path))
    assert (code, out) == (2, "")
    (line,) = err
    assert line.startswith(f"crawl-platform: the lake at {store.location.catalog} already holds crawl data (1 crawls,")
    assert store.snapshot_id() == before  # nothing written

    code, out, err = run(capsys, "migrate", str(path), "--force")
    assert (code, err) == (0, [])
    assert out.splitlines()[-1] == f"the lake's earlier contents stay readable AT (VERSION => {before})"
    assert store.query("SELECT crawl_id FROM crawls") == [("old-1",)]
    assert store.query(f"SELECT crawl_id FROM crawls AT (VERSION => {before})") == [("new-1",)]


@pytest.mark.parametrize("content", [None, b"not a database at all" * 100])
def test_migrate_of_a_missing_or_foreign_file_is_one_line_exit_2(lake_env, tmp_path, capsys, content):
    path = tmp_path / "crawl.duckdb"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "migrate", str(path))
    assert (code, out) == (2, "")
    (line,) = err
    reason = "no such file: " if content is None else f"{path} is not a DuckDB database: "
    assert line.startswith(f"crawl-platform: {reason}")
    assert not lake_env.lake_path.exists()
