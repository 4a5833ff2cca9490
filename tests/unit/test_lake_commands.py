"""The lake commands of ``crawl-platform``: ``sql``, ``backup``, ``restore`` and ``migrate``.

Each runs on a real lake that the engine's own code filled (crawls registered through the
frontier, batches landed by ``land_batch``), through the installed script's ``main`` or as a
subprocess. What a user would notice is asserted: the rows a query prints, the one line and exit
code of a refusal, the same rows and content hashes after a backup and a restore, the old file's
rows in the lake after ``migrate``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.politeness import HostRecord
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import parse_html
from crawl_platform.store.backup import MANIFEST, Manifest
from crawl_platform.store.console import PROMPT, LakeSession, ResultPrinter, run_shell
from crawl_platform.store.database import TABLES, CrawlStore, LakeLocation
from crawl_platform.store.landing import LandedBatch, land_batch
from crawl_platform.store.transfer import TableFingerprint, table_fingerprints
from crawl_platform_dagster.cli import main
from tests.conftest import export_settings, lake_catalog
from tests.unit.crawl_rows import crawl_request, fetch_result, page_html

SITE = "http://site.example"


@pytest.fixture
def lake_env(store_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The test's settings exported, as the command line reads them."""
    return export_settings(store_settings, monkeypatch)


@pytest.fixture
def frontier(store: CrawlStore) -> Frontier:
    bus = InMemoryBus()
    bus.ensure_topics()
    return Frontier(store, bus)


def land_pages(store: CrawlStore, frontier: Frontier, crawl_id: str, batch_id: str, paths: list[str]) -> LandedBatch:
    """Register ``crawl_id`` (once), land one batch fetching ``paths`` of the site, and expand it:
    every crawl table gets rows."""
    urls = [f"{SITE}{p}" for p in paths]
    frontier.register(crawl_request(crawl_id, *urls))
    results = {u: fetch_result(u, page_html(f"{crawl_id} {u}", f"{SITE}/next{p}"))
               for u, p in zip(urls, paths, strict=True)}
    parsed = {u: parse_html(r.body, r.final_url, r.content_type) for u, r in results.items()}
    landed = land_batch(store, batch_id, [FrontierURL(crawl_id, u, 0) for u in urls], results, parsed,
                        hosts=[HostRecord(SITE, delay_ms=250)])
    frontier.expand(batch_id)
    return landed


def fingerprints(store: CrawlStore) -> dict[str, TableFingerprint]:
    with store.read() as con:
        return table_fingerprints(con)


def lake_at(path: Path) -> CrawlStore:
    return CrawlStore(LakeLocation.from_settings(Settings(lake_path=path)))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """``crawl-platform ARGV`` in this process: exit code, stdout, non-blank stderr lines."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, [line for line in out.err.splitlines() if line.strip()]


def cli(settings: Settings, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``crawl-platform ARGV`` as a subprocess, its output to a pipe."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "crawl_platform_dagster.cli", *argv], input=stdin,
                          env={**base, **settings.to_env()}, cwd=settings.lake_path.parent,
                          capture_output=True, text=True, timeout=120, check=False)


# --- sql -----------------------------------------------------------------------------------------

def test_sql_c_prints_the_rows_of_the_query(lake_env, store, frontier, capsys):
    land_pages(store, frontier, "c1", "b1", ["/a", "/b"])
    land_pages(store, frontier, "c2", "b2", ["/z"])
    code, out, err = run(capsys, "sql", "--csv", "-c",
                         "SELECT url, version FROM pages WHERE crawl_id = 'c1' ORDER BY url")
    assert (code, err) == (0, [])
    assert out.splitlines() == ["url,version", f"{SITE}/a,1", f"{SITE}/b,1"]


def test_sql_c_prints_plain_rows_in_a_pipe_one_result_per_statement(lake_env, store, frontier, capsys):
    land_pages(store, frontier, "c1", "b1", ["/a"])
    code, out, _ = run(capsys, "sql", "-c", "SELECT count(*) AS n FROM pages; SELECT title FROM documents")
    assert code == 0
    assert out.splitlines() == ["n", "1", "title", f"c1 {SITE}/a"]


def test_sql_writes_fail_read_only_with_one_line_unless_write(lake_env, store, frontier):
    land_pages(store, frontier, "c1", "b1", ["/a"])
    done = cli(lake_env, "sql", "-c", "DELETE FROM pages")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith('crawl-platform: Invalid Input Error: Cannot execute statement of type "DELETE" '
                           'on database "lake" which is attached in read-only mode!')
    assert store.query("SELECT count(*) FROM pages") == [(1,)]

    done = cli(lake_env, "sql", "--write", "-c", "DELETE FROM pages; SELECT count(*) AS n FROM pages")
    assert (done.returncode, done.stdout, done.stderr) == (0, "1 row changed\nn\n0\n", "")
    assert store.query("SELECT count(*) FROM pages") == [(0,)]


def test_sql_error_is_one_line_exit_1(lake_env, store, capsys):
    code, out, err = run(capsys, "sql", "-c", "SELECT * FROM no_such_table")
    assert (code, out) == (1, "")
    (line,) = err
    assert line.startswith("crawl-platform: Catalog Error: Table with name no_such_table does not exist!")


def test_sql_without_a_lake_is_one_line_exit_1(lake_env, capsys):
    code, _, err = run(capsys, "sql", "-c", "SELECT 1")
    assert code == 1
    assert err == [f"crawl-platform: there is no lake at sqlite:{lake_env.lake_path / 'catalog.sqlite'} yet "
                   "(nothing has landed, or CRAWL_LAKE_PATH points elsewhere)"]
    assert not lake_env.lake_path.exists()  # looking does not create it


def test_the_shell_answers_statements_fed_on_stdin(lake_env, store, frontier):
    land_pages(store, frontier, "c1", "b1", ["/a", "/b"])
    script = ("SELECT count(*) AS n\n  FROM pages;\nSELECT url FROM pages ORDER BY url DESC;\n"
              ".quit\nSELECT 'after quit';\n")
    done = cli(lake_env, "sql", stdin=script)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["n", "2", "url", f"{SITE}/b", f"{SITE}/a"]


def test_the_shell_prompts_and_goes_on_after_a_failed_statement(store, frontier):
    land_pages(store, frontier, "c1", "b1", ["/a"])
    lines = iter(["SELECT nope", "FROM pages;", "SELECT url FROM pages;"])
    prompts: list[str] = []

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None  # Ctrl-D

    out, err = io.StringIO(), io.StringIO()
    session = LakeSession.open(store)
    try:
        failed = run_shell(session, read_line, ResultPrinter(out, "plain"), err)
    finally:
        session.close()
    assert failed == 1
    assert prompts == [PROMPT, "  ...> ", PROMPT, PROMPT]
    (line,) = err.getvalue().splitlines()  # DuckDB's message, without the echoed SQL and caret
    assert line.startswith('Binder Error: Referenced column "nope" not found in FROM clause!')
    assert out.getvalue().splitlines() == ["url", f"{SITE}/a"]


def test_time_travel_and_the_change_feed_as_the_readme_shows(lake_env, store, frontier, capsys):
    first = land_pages(store, frontier, "X", "b1", ["/a"])
    land_pages(store, frontier, "X", "b2", ["/b"])
    code, out, _ = run(capsys, "sql", "--csv", "-c",
                       f"SELECT url, version FROM pages AT (VERSION => {first.snapshot_id}) WHERE crawl_id = 'X'")
    assert (code, out.splitlines()) == (0, ["url,version", f"{SITE}/a,1"])
    latest = store.snapshot_id()
    code, out, _ = run(capsys, "sql", "--csv", "-c",
                       f"SELECT change_type, url FROM ducklake_table_changes('lake', 'main', 'pages', "
                       f"{first.snapshot_id + 1}, {latest})")
    assert (code, out.splitlines()) == (0, ["change_type,url", f"insert,{SITE}/b"])


# --- backup and restore --------------------------------------------------------------------------

def test_backup_then_restore_gives_the_same_rows_and_hashes(lake_env, store, frontier, tmp_path, capsys):
    # More rows than DuckLake inlines into the catalog (10 an insert): the pages are Parquet files.
    land_pages(store, frontier, "c1", "b1", [f"/p{i}" for i in range(15)])
    land_pages(store, frontier, "c2", "b2", ["/p1", "/c"])
    before = fingerprints(store)
    assert all(before[t].rows for t in TABLES)  # every table is part of the test

    code, out, err = run(capsys, "backup", str(tmp_path / "bk"))
    assert (code, err) == (0, [])
    assert out.startswith(f"backed up snapshot {store.snapshot_id()} ")
    manifest = Manifest.read(tmp_path / "bk")
    assert manifest.tables == before
    assert manifest.snapshot_id == store.snapshot_id()
    assert list((tmp_path / "bk" / "data").rglob("*.parquet"))

    shutil.move(tmp_path / "bk", tmp_path / "moved")  # a backup folder is copied elsewhere to be kept
    code, out, err = run(capsys, "restore", str(tmp_path / "moved"), "--lake-path", str(tmp_path / "restored"))
    assert (code, err) == (0, [])
    restored = lake_at(tmp_path / "restored")
    assert fingerprints(restored) == before
    query = "SELECT url, crawl_id, version, content_hash, batch_id FROM pages ORDER BY ALL"
    assert restored.query(query) == store.query(query)
    assert restored.query("SELECT origin, delay_ms FROM hosts") == [(SITE, 250)]
    restored.close()


def test_a_backup_at_an_older_snapshot_restores_that_state(lake_env, store, frontier, tmp_path, capsys):
    a = land_pages(store, frontier, "A", "bA", ["/a1", "/a2"])
    land_pages(store, frontier, "B", "bB", ["/b1"])
    code, _, err = run(capsys, "backup", str(tmp_path / "bk"), "--snapshot", str(a.snapshot_id))
    assert (code, err) == (0, [])
    assert Manifest.read(tmp_path / "bk").snapshot_id == a.snapshot_id

    code, _, err = run(capsys, "restore", str(tmp_path / "bk"), "--lake-path", str(tmp_path / "restored"))
    assert (code, err) == (0, [])
    restored = lake_at(tmp_path / "restored")
    assert restored.query("SELECT url FROM pages ORDER BY url") == [(f"{SITE}/a1",), (f"{SITE}/a2",)]
    assert restored.query("SELECT DISTINCT batch_id FROM batch_items") == [("bA",)]
    restored.close()


def test_a_backup_restores_into_a_postgresql_catalog_and_backs_up_from_it(lake_env, store, frontier, tmp_path,
                                                                            capsys, monkeypatch, postgres_url):
    land_pages(store, frontier, "c1", "b1", [f"/p{i}" for i in range(12)])
    assert run(capsys, "backup", str(tmp_path / "bk"))[0] == 0
    monkeypatch.setenv("CRAWL_LAKE_CATALOG", lake_catalog(postgres_url))
    monkeypatch.setenv("CRAWL_LAKE_DATA_PATH", str(tmp_path / "pg-data"))

    code, out, err = run(capsys, "restore", str(tmp_path / "bk"))
    assert (code, err) == (0, [])
    assert f"into {lake_catalog(postgres_url)}: " in out
    code, _, err = run(capsys, "backup", str(tmp_path / "bk-pg"))
    assert (code, err) == (0, [])
    assert Manifest.read(tmp_path / "bk-pg").tables == Manifest.read(tmp_path / "bk").tables == fingerprints(store)


def test_restore_refuses_a_lake_that_holds_data_unless_force(lake_env, store, frontier, tmp_path, capsys):
    land_pages(store, frontier, "old", "b1", ["/a"])
    assert run(capsys, "backup", str(tmp_path / "bk"))[0] == 0
    land_pages(store, frontier, "new", "b2", ["/n"])
    code, _, err = run(capsys, "restore", str(tmp_path / "bk"))
    assert code == 2
    (line,) = err
    assert line.startswith(f"crawl-platform: the lake at {store.location.catalog} already holds crawl data (2 crawls,")
    assert store.query("SELECT count(*) FROM crawls") == [(2,)]

    code, _, err = run(capsys, "restore", str(tmp_path / "bk"), "--force")
    assert (code, err) == (0, [])
    assert store.query("SELECT crawl_id FROM crawls") == [("old",)]
    assert fingerprints(store) == Manifest.read(tmp_path / "bk").tables


def test_restore_of_a_tampered_backup_changes_nothing(lake_env, store, frontier, tmp_path, capsys):
    land_pages(store, frontier, "c1", "b1", ["/a"])
    assert run(capsys, "backup", str(tmp_path / "bk"))[0] == 0
    manifest = json.loads((tmp_path / "bk" / MANIFEST).read_text())
    manifest["tables"]["pages"]["digest"] = "0" * 16
    (tmp_path / "bk" / MANIFEST).write_text(json.dumps(manifest))
    code, _, err = run(capsys, "restore", str(tmp_path / "bk"), "--lake-path", str(tmp_path / "restored"))
    assert code == 1
    assert err == [f"crawl-platform: the backup in {tmp_path / 'bk'} does not match its manifest in pages: "
                   "nothing was restored"]
    assert lake_at(tmp_path / "restored").query("SELECT count(*) FROM pages") == [(0,)]


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
                                f"frontier 1, pages 2, documents 2, links 2, batch_items 1, hosts {hosts} rows"]
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


# --- bad input: one line, exit 2, nothing written ------------------------------------------------

def test_backup_into_a_folder_that_is_not_empty_is_one_line_exit_2(lake_env, store, tmp_path, capsys):
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    code, out, err = run(capsys, "backup", str(dest))
    assert (code, out) == (2, "")
    assert err == [f"crawl-platform: the backup destination {dest} exists and is not empty: name a new folder"]
    assert sorted(p.name for p in dest.iterdir()) == ["keep.txt"]


def test_backup_at_a_snapshot_the_lake_never_had_is_one_line_exit_2(lake_env, store, tmp_path, capsys):
    latest = store.snapshot_id()
    code, _, err = run(capsys, "backup", str(tmp_path / "bk"), "--snapshot", str(latest + 100))
    assert code == 2
    assert err == [f"crawl-platform: the lake has no snapshot {latest + 100} (its latest is {latest})"]
    assert not (tmp_path / "bk").exists()  # what was started is removed again


def test_restore_from_a_folder_without_a_manifest_is_one_line_exit_2(lake_env, tmp_path, capsys):
    src = tmp_path / "not-a-backup"
    src.mkdir()
    code, out, err = run(capsys, "restore", str(src), "--lake-path", str(tmp_path / "restored"))
    assert (code, out) == (2, "")
    assert err == [f"crawl-platform: {src} is not a backup: it has no backup.json (an unfinished backup has none)"]
    assert not (tmp_path / "restored").exists()


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
