"""The lake commands of ``crawl-platform``: ``sql``, ``backup`` and ``restore`` (``migrate`` is in
test_lake_migrate.py).

Each runs on a real lake that the engine's own code filled (crawls registered through the
frontier, batches landed by ``land_batch``), through the installed script's ``main`` or as a
subprocess. What a user would notice is asserted: the rows a query prints, the one line and exit
code of a refusal, the same rows and content hashes after a backup and a restore.
"""

from __future__ import annotations

import io
import json
import shutil

from crawl_platform.cli.shell import PROMPT, ResultPrinter, run_shell
from crawl_platform.lake.backup import MANIFEST, Manifest
from crawl_platform.store.schema import TABLES
from crawl_platform.store.session import LakeSession
from tests.conftest import CATALOG_PASSWORD, lake_catalog
from tests.unit.lake.lake_cli import SITE, cli, fingerprints, lake_at, land_copies, land_pages, run

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
    land_pages(store, frontier, "c2", "e0.p1-0-2", ["/p1", "/c"])  # a batch key: its ranges land in batch_ranges
    land_copies(store, frontier, "c3", "b3")
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


def test_backup_and_restore_never_show_or_store_the_catalog_password(lake_env, store, frontier, tmp_path, capsys,
                                                                     monkeypatch, password_catalog):
    land_pages(store, frontier, "c1", "b1", ["/a", "/b"])
    assert run(capsys, "backup", str(tmp_path / "bk"))[0] == 0
    monkeypatch.setenv("CRAWL_LAKE_CATALOG", password_catalog)
    monkeypatch.setenv("CRAWL_LAKE_DATA_PATH", str(tmp_path / "pg-data"))
    shown = password_catalog.replace(CATALOG_PASSWORD, "***")

    code, out, err = run(capsys, "restore", str(tmp_path / "bk"))  # the target is the environment's
    assert (code, err) == (0, [])
    assert f"into {shown}: " in out
    code, out, err = run(capsys, "restore", str(tmp_path / "bk"))
    assert code == 2
    assert err[0].startswith(f"crawl-platform: the lake at {shown} already holds crawl data")
    code, out, err = run(capsys, "backup", str(tmp_path / "bk-pg"))
    assert (code, err) == (0, [])
    assert f" of {shown} to " in out

    manifest = (tmp_path / "bk-pg" / MANIFEST).read_text()
    assert json.loads(manifest)["source"] == shown
    assert CATALOG_PASSWORD not in manifest
    assert CATALOG_PASSWORD not in (tmp_path / "bk-pg" / "catalog.sqlite").read_bytes().decode("latin-1")
    code, out, err = run(capsys, "restore", str(tmp_path / "bk-pg"), "--lake-path", str(tmp_path / "back"))
    assert (code, err) == (0, [])
    back = lake_at(tmp_path / "back")
    assert fingerprints(back) == fingerprints(store)
    back.close()


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
