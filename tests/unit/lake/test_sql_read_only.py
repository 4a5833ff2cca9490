"""``crawl-platform sql`` without ``--write`` reads the lake and nothing else.

One lake is built for the module in a state where each escape would leave a mark: files the
catalog scheduled for deletion, small adjacent Parquet files, rows inlined in the catalog and an
orphan file on the data path. Every escape is run through the command line against it and must be
refused with its one line and exit 1, with every file under the test's folder, the lake's latest
snapshot and its rows as they were. Reads still work read-only, on an embedded and on a PostgreSQL
catalog, and ``--write`` still does what it did.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.cli.shell import ResultPrinter, run_shell
from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.lockdown import call_refusal
from crawl_platform.store.maintenance import maintain_lake, measure_lake
from crawl_platform.store.schema import TABLES
from crawl_platform.store.session import LakeSession
from crawl_platform.store.transfer import TableFingerprint
from tests.conftest import export_settings, lake_catalog
from tests.unit.lake.lake_cli import SITE, fingerprints, land_pages, run

HINT = "(read-only session; use --write)"


@dataclass(frozen=True)
class Lake:
    settings: Settings
    store: CrawlStore
    root: Path  # the module's folder: the lake, and where escapes aim their files
    orphan: Path  # a Parquet file of 7 rows on the data path that no commit references
    before_last: int  # the latest snapshot before the last batch (c4, its two pages inlined)


def frontier_of(store: CrawlStore) -> Frontier:
    bus = InMemoryBus()
    bus.ensure_topics()
    return Frontier(store, bus)


@pytest.fixture(scope="module")
def armed_lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    root = tmp_path_factory.mktemp("read-only")
    settings = Settings(lake_path=root / "lake")
    store = CrawlStore.from_settings(settings)
    store.ensure_schema()
    frontier = frontier_of(store)
    land_pages(store, frontier, "c1", "b1", [f"/a{i}" for i in range(15)])  # Parquet: more than 10 rows
    land_pages(store, frontier, "c2", "b2", [f"/b{i}" for i in range(15)])
    # Every snapshot but the latest expired and the files merged: the old files await deletion.
    maintain_lake(store, retention=timedelta(0), reader_grace=timedelta(days=1))
    assert measure_lake(store).awaiting_removal > 0
    land_pages(store, frontier, "c3", "b3", [f"/c{i}" for i in range(15)])  # a small file beside the merged one
    before_last = store.snapshot_id()
    land_pages(store, frontier, "c4", "b4", ["/d1", "/d2"])  # inlined in the catalog
    orphan = Path(store.location.data_path) / "main" / "pages" / "ducklake-00000000-0000-7000-8000-000000000000.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT range AS i FROM range(7)) TO '{orphan}' (FORMAT parquet)")
    (root / "outside.csv").write_text("a,b\n1,2\n")
    yield Lake(settings, store, root, orphan, before_last)
    store.close()


@pytest.fixture
def armed_env(armed_lake: Lake, monkeypatch: pytest.MonkeyPatch) -> Lake:
    """The module's lake, its settings exported as the command line reads them."""
    export_settings(armed_lake.settings, monkeypatch)
    return armed_lake


def state(lake: Lake) -> tuple[dict[str, int], int, dict[str, TableFingerprint]]:
    """Every file under the module's folder with its size (SQLite's shared-memory and log files
    aside: readers open them), the lake's latest snapshot and its rows."""
    files = {str(p.relative_to(lake.root)): p.stat().st_size for p in lake.root.rglob("*")
             if p.is_file() and not p.name.endswith(("-wal", "-shm"))}
    return files, lake.store.snapshot_id(), fingerprints(lake.store)


def refused(reason: str) -> str:
    return f"read-only session: {reason}; use --write"


ESCAPES = {
    # kinds of statement
    "attach the catalog again, read-write": (
        "ATTACH 'ducklake:{catalog}' AS again (DATA_PATH '{data}'); INSERT INTO again.hosts SELECT * FROM hosts",
        refused("ATTACH opens another database")),
    "attach the catalog file as SQLite": (
        "ATTACH '{catalog_file}' AS raw (TYPE sqlite)", refused("ATTACH opens another database")),
    "attach a new database file": ("ATTACH '{root}/new.duckdb'", refused("ATTACH opens another database")),
    "detach the lake": ("USE memory; DETACH lake", refused("DETACH closes a database")),
    "copy to a file": ("COPY pages TO '{root}/pages.csv'", refused("COPY reads and writes files")),
    "copy onto the data path": ("COPY (SELECT 1 AS x) TO '{data}main/pages/x.parquet'",
                                refused("COPY reads and writes files")),
    "export the database": ("EXPORT DATABASE '{root}/export'", refused("EXPORT DATABASE writes files")),
    "load an extension file": ("LOAD '{root}/x.duckdb_extension'", refused("LOAD and INSTALL add extensions")),
    "install an extension": ("INSTALL httpfs", refused("LOAD and INSTALL add extensions")),
    "update extensions": ("UPDATE EXTENSIONS", refused("UPDATE EXTENSIONS installs extensions")),
    "explain analyze runs a copy": ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{root}/x.csv'",
                                    refused("COPY reads and writes files")),
    "explain with options runs a copy": ("EXPLAIN (FORMAT json, ANALYZE) COPY (SELECT 1) TO '{root}/x.csv'",
                                         refused("COPY reads and writes files")),
    "prepare a copy": ("PREPARE p AS COPY (SELECT 1) TO '{root}/x.csv'",
                       refused("a prepared statement would run unchecked")),
    "pragma checkpoint": ("PRAGMA force_checkpoint", refused("this PRAGMA changes the database or the session")),
    "checkpoint": ("CHECKPOINT", refused("CHECKPOINT writes the lake's files")),
    # functions
    "delete orphaned files": ("CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)",
                              refused("ducklake_delete_orphaned_files() changes the lake")),
    "clean up old files": ("SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)",
                           refused("ducklake_cleanup_old_files() changes the lake")),
    "merge adjacent files": ("CALL ducklake_merge_adjacent_files('lake')",
                             refused("ducklake_merge_adjacent_files() changes the lake")),
    "merge through the lake's macro": ("CALL lake.merge_adjacent_files()",
                                       refused("merge_adjacent_files() changes the lake")),
    "rewrite data files": ('SELECT * FROM "DuckLake_Rewrite_Data_Files"(\'lake\', delete_threshold => 0.0)',
                           refused("ducklake_rewrite_data_files() changes the lake")),
    "flush inlined data": ("CALL ducklake_flush_inlined_data('lake')",
                           refused("ducklake_flush_inlined_data() changes the lake")),
    "expire snapshots": ("CALL ducklake_expire_snapshots('lake', older_than => now())",
                         refused("ducklake_expire_snapshots() changes the lake")),
    "set an option": ("CALL lake.set_option('parquet_compression', 'zstd')", refused("set_option() changes the lake")),
    "checkpoint function": ("SELECT * FROM force_checkpoint()", refused("force_checkpoint() writes the lake's files")),
    "a write hidden in a temporary table": (
        "CREATE TEMP TABLE t AS SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)",
        refused("ducklake_cleanup_old_files() changes the lake")),
    "a write hidden in a macro": ("CREATE MACRO m() AS TABLE SELECT * FROM ducklake_merge_adjacent_files('lake')",
                                  refused("ducklake_merge_adjacent_files() changes the lake")),
    "a write hidden in a variable": (
        "SET VARIABLE v = (SELECT count(*) FROM ducklake_cleanup_old_files('lake', cleanup_all => true))",
        refused("ducklake_cleanup_old_files() changes the lake")),
    "a write spelt as text": (
        "SELECT * FROM query('SELECT * FROM ducklake_' || 'cleanup_old_files(''lake'', cleanup_all => true)')",
        refused("query() runs SQL given as text")),
    "the SQLite driver reads any file": ("SELECT * FROM sqlite_scan('{catalog_file}', 'ducklake_snapshot')",
                                         refused("sqlite_scan() reaches a database directly, not through the lake")),
    "log to files": ("CALL enable_logging('QueryLog', storage => 'file', storage_path => '{data}logs')",
                     refused("enable_logging() writes log files")),
    "profile to a file": ("CALL enable_profiling(save_location => '{root}/profile.txt')",
                          refused("enable_profiling() writes profile files")),
    # DuckDB's own settings
    "read a file outside the lake": (
        "SELECT * FROM read_csv('{root}/outside.csv')",
        'Permission Error: Cannot access file "{root}/outside.csv" - file system operations are disabled '
        f"by configuration {HINT}"),
    "import a database from files": (
        "IMPORT DATABASE '{root}'",
        'Permission Error: Cannot access file "{root}/schema.sql" - file system operations are disabled '
        f"by configuration {HINT}"),
    "turn autoloading back on": (
        "SET autoload_known_extensions = true",
        'Invalid Input Error: Cannot change configuration option "autoload_known_extensions" - the '
        f"configuration has been locked {HINT}"),
    "widen the allowed directories": (
        "SET allowed_directories = ['/']",
        'Invalid Input Error: Cannot change configuration option "allowed_directories" - the '
        f"configuration has been locked {HINT}"),
    "unlock the configuration": (
        "SET lock_configuration = false",
        'Invalid Input Error: Cannot change configuration option "lock_configuration" - the '
        f"configuration has been locked {HINT}"),
}


@pytest.mark.parametrize(("sql", "line"), ESCAPES.values(), ids=ESCAPES.keys())
def test_sql_read_only_refuses_an_escape_with_one_line_and_changes_nothing(armed_env, capsys, sql, line):
    lake = armed_env
    names = {"root": lake.root, "data": lake.store.location.data_path, "catalog": lake.store.location.catalog,
             "catalog_file": lake.store.location.sqlite_path}
    before = state(lake)
    code, out, err = run(capsys, "sql", "-c", sql.format(**names))
    assert state(lake) == before
    assert lake.orphan.exists()
    assert (code, out, err) == (1, "", [f"crawl-platform: {line.format(**names)}"])


def test_sql_read_only_still_reads_everything(armed_env):
    lake = armed_env
    latest = lake.store.snapshot_id()
    session = LakeSession.open(lake.store)
    out, err = io.StringIO(), io.StringIO()

    def answer(sql: str) -> list[str]:
        out.seek(0)
        out.truncate()
        session.run(sql, ResultPrinter(out, "csv"))
        return out.getvalue().splitlines()

    try:
        assert answer("SELECT count(*) AS n FROM pages") == ["n", "47"]
        assert answer(f"SELECT count(*) AS n FROM pages AT (VERSION => {lake.before_last})") == ["n", "45"]
        assert answer(f"SELECT url FROM lake.table_changes('pages', {lake.before_last + 1}, {latest}) "
                      "ORDER BY url") == ["url", f"{SITE}/d1", f"{SITE}/d2"]
        assert answer("SELECT count(*) AS n FROM ducklake_table_changes('lake', 'main', 'pages', "
                      f"{lake.before_last + 1}, {latest})") == ["n", "2"]
        assert answer("SELECT max(snapshot_id) AS latest FROM lake.snapshots()") == ["latest", str(latest)]
        tables = set(TABLES) | {f"records_c{k}" for k in range(1, 5)}  # each crawl's extracted records
        assert set(answer("SHOW TABLES")[1:]) == tables
        assert set(answer("PRAGMA show_tables")[1:]) == tables
        assert [row.split(",")[0] for row in answer("DESCRIBE pages")][:3] == ["column_name", "url", "crawl_id"]
        assert answer("SELECT column_name, count FROM (SUMMARIZE pages) WHERE column_name = 'url'") == [
            "column_name,count", "url,47"]
        assert answer("EXPLAIN ANALYZE SELECT count(*) FROM pages")[0] == "explain_key,explain_value"
        # What stays in the session's memory: a temporary table, a variable, a free setting.
        assert answer("CREATE TEMP TABLE mine AS SELECT url FROM pages WHERE crawl_id = 'c4'; "
                      "INSERT INTO mine VALUES ('x'); SELECT count(*) AS n FROM mine") == ["1 row changed", "n", "3"]
        assert answer("SET VARIABLE crawl = 'c3'; SET threads = 1; "
                      "SELECT count(*) AS n FROM pages WHERE crawl_id = getvariable('crawl')") == ["n", "15"]
        assert answer(f"SELECT count(*) AS n FROM read_parquet('{lake.orphan}')") == ["n", "7"]

        lines = iter([".tables"])
        session_out = io.StringIO()

        def read_line(_prompt: str) -> str:
            try:
                return next(lines)
            except StopIteration:
                raise EOFError from None

        assert run_shell(session, read_line, ResultPrinter(session_out, "plain"), err) == 0
        assert set(session_out.getvalue().splitlines()[1:]) == tables | {"mine"}  # the temporary table too
    finally:
        session.close()
    assert err.getvalue() == ""


def unrefused_table_functions(store: CrawlStore) -> set[str]:
    """The table functions a read-only session on ``store`` may call."""
    session = LakeSession.open(store)
    try:
        names = {row[0] for row in session.con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')"
        ).fetchall()}
    finally:
        session.close()
    return {name for name in names if call_refusal(name) is None}


def test_every_table_function_is_refused_or_known_to_read(armed_lake):
    """Table functions are where DuckDB and its extensions keep side effects. One that a DuckDB or
    extension upgrade adds fails here until it is looked at and listed as a read or refused."""
    assert unrefused_table_functions(armed_lake.store) == READS


READS = {
    "arrow_scan", "arrow_scan_dumb", "disable_logging", "disable_profiling", "duckdb_approx_database_count",
    "duckdb_columns", "duckdb_connection_count", "duckdb_constraints", "duckdb_coordinate_systems",
    "duckdb_databases", "duckdb_dependencies", "duckdb_extensions", "duckdb_external_file_cache",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_log_contexts", "duckdb_logs",
    "duckdb_logs_parsed", "duckdb_memory", "duckdb_optimizers", "duckdb_prepared_statements",
    "duckdb_profiling_settings", "duckdb_schemas", "duckdb_secret_types", "duckdb_secrets", "duckdb_sequences",
    "duckdb_settings", "duckdb_table_sample", "duckdb_tables", "duckdb_temporary_files", "duckdb_types",
    "duckdb_variables", "duckdb_views", "ducklake_current_snapshot", "ducklake_last_committed_snapshot",
    "ducklake_list_files", "ducklake_options", "ducklake_scan", "ducklake_settings", "ducklake_snapshots",
    "ducklake_table_changes", "ducklake_table_deletions", "ducklake_table_info", "ducklake_table_insertions",
    "generate_series", "glob", "histogram", "histogram_values", "icu_calendar_names", "json_each", "json_tree",
    "pandas_scan", "parquet_bloom_probe", "parquet_file_metadata", "parquet_full_metadata", "parquet_kv_metadata",
    "parquet_metadata", "parquet_scan", "parquet_schema", "pg_timezone_names",
    "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform", "pragma_show",
    "pragma_storage_info", "pragma_table_info", "pragma_user_agent", "pragma_version", "python_map_function",
    "query_table", "range", "read_blob", "read_csv", "read_csv_auto", "read_duckdb", "read_json",
    "read_json_auto", "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_parquet", "read_text", "repeat", "repeat_row",
    "seq_scan", "sniff_csv", "summary", "test_all_types", "test_vector_types", "unnest", "which_secret",
}
"""The table functions of a read-only session on an embedded lake (DuckDB 1.5.5 with DuckLake and
SQLite) that only read: catalogs, settings, logs and profiles of the session, files (within the
lake's data path, by the settings), generated rows. A PostgreSQL catalog's driver adds two."""
POSTGRES_READS = {"pg_clear_cache", "read_postgres_binary"}  # its connection cache; a file


# --- a PostgreSQL catalog --------------------------------------------------------------------------

@pytest.fixture
def postgres_lake(lake_env, tmp_path, monkeypatch, postgres_url) -> Iterator[tuple[CrawlStore, int]]:
    """A lake whose catalog is a PostgreSQL database, the command line's, and its latest snapshot
    before the second of the two batches landed."""
    settings = export_settings(lake_env.model_copy(update={
        "lake_catalog": lake_catalog(postgres_url), "lake_data_path": str(tmp_path / "pg-data")}), monkeypatch)
    store = CrawlStore.from_settings(settings)
    store.ensure_schema()
    frontier = frontier_of(store)
    land_pages(store, frontier, "p1", "b1", [f"/p{i}" for i in range(12)])
    before_last = store.snapshot_id()
    land_pages(store, frontier, "p2", "b2", ["/q"])
    yield store, before_last
    store.close()


def test_sql_read_only_on_a_postgresql_catalog_reads_and_refuses(postgres_lake, postgres_url, capsys):
    store, before_last = postgres_lake
    before = store.snapshot_id()
    code, out, err = run(capsys, "sql", "--csv", "-c",
                         "SELECT count(*) AS n FROM pages; "
                         f"SELECT count(*) AS n FROM pages AT (VERSION => {before_last}); "
                         f"SELECT url FROM lake.table_changes('pages', {before_last + 1}, {before})")
    assert (code, err) == (0, [])
    assert out.splitlines() == ["n", "13", "n", "12", "url", f"{SITE}/q"]
    assert unrefused_table_functions(store) == READS | POSTGRES_READS

    for sql, line in [
        (f"ATTACH 'ducklake:{store.location.catalog}' AS again (DATA_PATH '{store.location.data_path}')",
         refused("ATTACH opens another database")),
        (f"ATTACH '{lake_catalog(postgres_url).removeprefix('postgres:')}' AS p (TYPE postgres)",
         refused("ATTACH opens another database")),
        (f"CALL postgres_execute('__ducklake_metadata_lake', "
         f"'DELETE FROM ducklake_snapshot WHERE snapshot_id = {before}')",
         refused("postgres_execute() reaches a database directly, not through the lake")),
        ("SELECT * FROM postgres_query('__ducklake_metadata_lake', 'SELECT count(*) FROM ducklake_snapshot')",
         refused("postgres_query() reaches a database directly, not through the lake")),
        ("CREATE PERSISTENT SECRET kept (TYPE postgres, HOST 'elsewhere')",
         f'Permission Error: Cannot access directory "{Path.home() / ".duckdb" / "stored_secrets"}" - file system '
         f"operations are disabled by configuration {HINT}"),
    ]:
        code, out, err = run(capsys, "sql", "-c", sql)
        assert (code, out, err) == (1, "", [f"crawl-platform: {line}"]), sql
    assert store.snapshot_id() == before


# --- --write ----------------------------------------------------------------------------------------

def test_sql_write_still_runs_what_read_only_refuses(lake_env, store, frontier, tmp_path, capsys):
    land_pages(store, frontier, "c1", "b1", [f"/a{i}" for i in range(15)])
    land_pages(store, frontier, "c2", "b2", [f"/b{i}" for i in range(15)])
    maintain_lake(store, retention=timedelta(0), reader_grace=timedelta(days=1))
    assert measure_lake(store).awaiting_removal > 0

    code, out, err = run(capsys, "sql", "--write", "--csv", "-c",
                         f"COPY (SELECT count(*) AS n FROM pages) TO '{tmp_path}/count.csv'; "
                         "SELECT count(*) AS removed FROM ducklake_cleanup_old_files('lake', cleanup_all => true); "
                         "DELETE FROM pages WHERE crawl_id = 'c1'")
    assert (code, err) == (0, [])
    assert (tmp_path / "count.csv").read_text() == "n\n30\n"
    assert out.splitlines()[-1] == "15 rows changed"
    assert measure_lake(store).awaiting_removal == 0
    assert store.query("SELECT count(*) FROM pages") == [(15,)]

