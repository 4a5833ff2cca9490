"""The lake (crawl_platform.store.database): a reader and a writer never wait for each other, every
write is a snapshot to travel back to, and a lake that cannot be opened says why in one line and
keeps what it holds. Writer processes racing on one lake: test_lake_writers.py."""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.pipeline.landing import LandedBatch
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.store.extensions import load_extensions
from crawl_platform.store.location import LakeLocation
from tests.conftest import CATALOG_PASSWORD, POSTGRES_ADMIN_URL, lake_catalog
from tests.unit.crawl_rows import fetch_result, land, page_html

SITE = "http://lake.test"
# A write that waited for the reader would wait until the reader commits, which it does only
# after every write: any bound proves it; this one leaves room for a loaded machine.
PROMPT_S = 10.0


def land_pages(store: CrawlStore, batch_id: str, urls: list[str], title: str = "") -> LandedBatch:
    """Land one batch fetching ``urls`` (200, an HTML page whose title is ``title`` and the URL)."""
    items = [FrontierURL("lake", url, 0) for url in urls]
    return land(store, batch_id, items, [fetch_result(url, page_html(f"{title} {url}")) for url in urls])


def lake_reader(catalog: str, data_path: str, conn: Any) -> None:
    """Another process reading the lake as any DuckDB client would: the lake's read-only ATTACH
    with the extensions the platform loads; runs each SQL text it receives and sends back the rows."""
    location = LakeLocation(catalog, data_path)
    db = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    load_extensions(db, location.kind)
    db.execute(location.attach_sql(read_only=True))
    conn.send("ready")
    while (sql := conn.recv()) is not None:
        try:
            conn.send(db.execute(sql).fetchall())
        except duckdb.Error as err:
            conn.send(err)


class OtherProcessReader:
    """:func:`lake_reader` in a process of its own."""

    def __init__(self, location: LakeLocation) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=lake_reader, args=(location.catalog, location.data_path, child))

    def __enter__(self) -> OtherProcessReader:
        self.process.start()
        assert self.conn.poll(180), "the reader process did not attach the lake"
        assert self.conn.recv() == "ready"
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.send(None)
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()

    def ask(self, sql: str) -> list[tuple[Any, ...]]:
        self.conn.send(sql)
        assert self.conn.poll(60), f"the reader got no answer to {sql!r}"
        answer = self.conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def urls(self) -> list[str]:
        """The pages' URLs the reader sees, and fail unless it saw them promptly."""
        started = time.monotonic()
        urls = [url for (url,) in self.ask("SELECT url FROM lake.pages ORDER BY url")]
        assert time.monotonic() - started < PROMPT_S
        return urls


def test_a_reader_in_another_process_and_the_writers_never_wait_for_each_other(store):
    first = [f"{SITE}/a{i}" for i in range(3)]
    land_pages(store, "a", first)
    with OtherProcessReader(store.location) as reader:
        reader.ask("BEGIN TRANSACTION")
        assert reader.urls() == first
        landed = list(first)
        for n in range(4):
            urls = [f"{SITE}/b{n}-{i}" for i in range(10)]
            started = time.monotonic()
            land_pages(store, f"b{n}", urls)
            assert time.monotonic() - started < PROMPT_S, f"landing {n} waited for the reader"
            landed += urls
            assert reader.urls() == first  # its own snapshot, however far the lake moved on

        reader.ask("COMMIT")
        assert reader.urls() == sorted(landed)

        # While a write transaction is open, a reader reads what was committed, at once.
        with store.write() as con:
            con.execute("DELETE FROM pages")
            assert reader.urls() == sorted(landed)
        assert reader.urls() == []


def test_every_write_is_a_snapshot_to_travel_back_to(lake_settings):
    store = CrawlStore.from_settings(lake_settings)
    a_urls = [f"{SITE}/a{i}" for i in range(3)]
    b_urls = [f"{SITE}/b{i}" for i in range(2)]
    a = land_pages(store, "a", a_urls, "A")
    b = land_pages(store, "b", [*b_urls, a_urls[0]], "B")  # a0 changed: its version 2
    assert a.snapshot_id is not None
    assert b.snapshot_id is not None
    assert a.snapshot_id < b.snapshot_id == store.snapshot_id()

    def pages_at(snapshot: int) -> list[tuple[str, int]]:
        return store.query(f"SELECT url, version FROM pages AT (VERSION => {snapshot}) ORDER BY url")

    assert pages_at(a.snapshot_id - 1) == []  # batch A appeared in exactly its own snapshot
    assert pages_at(a.snapshot_id) == [(url, 1) for url in a_urls]
    assert pages_at(b.snapshot_id) == sorted([(a_urls[0], 2), *[(url, 1) for url in a_urls + b_urls]])
    assert store.query(f"SELECT title FROM documents AT (VERSION => {a.snapshot_id}) WHERE url = ?",
                       [a_urls[0]]) == [(f"A {a_urls[0]}",)]
    # What changed since A: exactly batch B's rows.
    changes = store.query(
        "SELECT change_type, url, version, batch_id FROM ducklake_table_changes(?, 'main', 'pages', ?, ?) "
        "ORDER BY url", [store.alias, a.snapshot_id + 1, b.snapshot_id])
    assert changes == sorted([("insert", a_urls[0], 2, "b"), *[("insert", url, 1, "b") for url in b_urls]],
                             key=lambda row: row[1])


def test_a_lake_made_by_an_older_schema_gains_the_new_columns_and_tables_and_keeps_its_rows(lake_settings):
    """A lake created before a column or a table was added to schema.sql: opening it adds them in
    one snapshot (NULL in the rows already there), and opening it again changes nothing."""
    store = CrawlStore.from_settings(lake_settings)
    land_pages(store, "old", [f"{SITE}/old"], "Old")
    with store.write() as con:  # what the lake looked like before `charset` and `hosts` existed
        con.execute("ALTER TABLE pages DROP COLUMN charset")
        con.execute("DROP TABLE hosts")
    before = store.snapshot_id()
    store.close()  # the lake opens again, as in a new process
    older = store
    assert older.query("SELECT url, charset FROM pages") == [(f"{SITE}/old", None)]
    assert older.query("SELECT count(*) FROM hosts") == [(0,)]
    land_pages(older, "new", [f"{SITE}/new"], "New")
    assert older.query("SELECT url, charset FROM pages ORDER BY url") == [
        (f"{SITE}/new", "utf-8"), (f"{SITE}/old", None)]
    upgraded = older.snapshot_id()
    assert upgraded == before + 2  # the upgrade's snapshot, then the batch's
    older.close()
    assert older.snapshot_id() == upgraded


def one_line_error(store: CrawlStore) -> str:
    """The message the store refuses to open with, after checking it is one line."""
    with pytest.raises(StoreUnavailableError) as caught:
        store.ensure_schema()
    message = str(caught.value)
    assert "\n" not in message
    return message


def closed_port_catalog(port: int) -> str:
    return f"postgres:dbname=crawl host=127.0.0.1 port={port} user=postgres"


def test_a_corrupt_catalog_is_named_and_left_as_it_was(tmp_path):
    catalog = tmp_path / "catalog.sqlite"
    garbage = os.urandom(8192)
    catalog.write_bytes(garbage)
    store = CrawlStore(LakeLocation(f"sqlite:{catalog}", f"{tmp_path / 'data'}/"))
    assert one_line_error(store) == f"the lake catalog {catalog} cannot be opened: file is not a database"
    assert catalog.read_bytes() == garbage


def test_a_catalog_folder_that_cannot_be_created_is_named(tmp_path):
    (tmp_path / "plain-file").write_text("not a folder")
    catalog = tmp_path / "plain-file" / "lake" / "catalog.sqlite"
    store = CrawlStore(LakeLocation(f"sqlite:{catalog}", f"{tmp_path / 'data'}/"))
    assert one_line_error(store) == (f"the lake catalog {catalog} cannot be opened: [Errno {errno.ENOTDIR}] "
                                     f"Not a directory: '{catalog.parent}'")


def test_an_unreachable_postgresql_catalog_is_named(tmp_path):
    port = free_port()
    store = CrawlStore(LakeLocation(closed_port_catalog(port), f"{tmp_path / 'data'}/"))
    message = one_line_error(store)
    assert message.startswith(f"cannot open the lake {closed_port_catalog(port)}: ")
    assert f'connection to server at "127.0.0.1", port {port} failed: Connection refused' in message


def test_a_data_path_that_is_a_file_is_named(tmp_path):
    data = tmp_path / "plain-file"
    data.write_text("not a folder")
    store = CrawlStore(LakeLocation(f"sqlite:{tmp_path / 'catalog.sqlite'}", f"{data}/"))
    assert one_line_error(store) == f"cannot create the lake's data path {data}: File exists"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder: file modes cannot deny it")
def test_a_read_only_data_folder_is_named(tmp_path):
    data = tmp_path / "read-only"
    data.mkdir(mode=0o500)
    store = CrawlStore(LakeLocation(f"sqlite:{tmp_path / 'catalog.sqlite'}", f"{data}/"))
    assert one_line_error(store) == f"the lake's data path {data} is not writable"


def test_failed_opens_leave_the_lake_and_its_rows_as_they_were(lake_settings, tmp_path):
    store = CrawlStore.from_settings(lake_settings)
    urls = [f"{SITE}/kept{i}" for i in range(3)]
    land_pages(store, "kept", urls)
    snapshot = store.snapshot_id()
    lake = store.location

    (tmp_path / "plain-file").write_text("not a folder")
    mistakes = {
        LakeLocation(lake.catalog, f"{tmp_path / 'plain-file'}/"): "cannot create the lake's data path",
        LakeLocation(lake.catalog, f"{tmp_path / 'typo-data'}/"): "does not match existing data path",
    }
    if lake.kind == "postgres":
        mistakes[LakeLocation(closed_port_catalog(free_port()), lake.data_path)] = "Connection refused"
    for wrong, problem in mistakes.items():
        assert problem in one_line_error(CrawlStore(wrong))

    reopened = CrawlStore(lake)
    try:
        assert reopened.snapshot_id() == snapshot
        assert reopened.query("SELECT url, version FROM pages ORDER BY url") == [(url, 1) for url in urls]
        assert land_pages(reopened, "after", [f"{SITE}/after"]).new_versions == 1
    finally:
        reopened.close()


def test_a_store_that_timed_out_creating_the_lake_opens_once_the_other_writer_is_done(store_settings):
    lake = LakeLocation.from_settings(store_settings)
    store = CrawlStore(lake, write_timeout_s=1)
    assert lake.sqlite_path is not None
    lake.sqlite_path.parent.mkdir(parents=True)
    # Another writer holds the lake's write lock (the flock next to the catalog) past the timeout.
    with open(lake.sqlite_path.with_name("catalog.sqlite.write.lock"), "a+") as other_writer:
        fcntl.flock(other_writer, fcntl.LOCK_EX)
        with pytest.raises(StoreBusyError, match=r"^another writer held the lake for 1s$"):
            store.ensure_schema()
        fcntl.flock(other_writer, fcntl.LOCK_UN)
    assert land_pages(store, "after-wait", [f"{SITE}/late"]).new_versions == 1
    assert store.query("SELECT url FROM pages") == [(f"{SITE}/late",)]


def test_status_with_an_unreachable_catalog_is_one_line_and_exit_1(store_settings, tmp_path):
    port = free_port()
    env = {**os.environ, **store_settings.to_env(), "CRAWL_LAKE_CATALOG": closed_port_catalog(port)}
    done = subprocess.run([str(Path(sys.executable).parent / "crawl-platform"), "status"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"crawl-platform: cannot open the lake {closed_port_catalog(port)}: ")
    assert f"port {port} failed: Connection refused" in line


@contextmanager
def refusing_connections(catalog: str) -> Iterator[None]:
    """The catalog's database turns every connection away for the ``with`` block (its open ones ended)."""
    import psycopg2  # noqa: PLC0415 - only the tests that lose a catalog need it

    dbname = catalog.split("dbname=", 1)[1].split(maxsplit=1)[0]
    admin = psycopg2.connect(POSTGRES_ADMIN_URL)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [dbname])
        yield
    finally:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
        admin.close()


def test_no_error_of_a_lake_shows_its_catalog_password(password_catalog, tmp_path):
    port = free_port()
    unreachable = f"postgres:dbname=crawl host=127.0.0.1 port={port} user=crawler password={CATALOG_PASSWORD}"
    message = one_line_error(CrawlStore(LakeLocation(unreachable, f"{tmp_path / 'none'}/")))
    assert message.startswith(f"cannot open the lake postgres:dbname=crawl host=127.0.0.1 port={port} "
                              f"user=crawler password=***: connection to server at \"127.0.0.1\", port {port} "
                              "failed: Connection refused")
    assert CATALOG_PASSWORD not in message

    store = CrawlStore(LakeLocation(password_catalog, f"{tmp_path / 'pg'}/"))
    land_pages(store, "b1", [f"{SITE}/a"])
    with refusing_connections(password_catalog), pytest.raises(duckdb.IOException) as caught:
        store.query("SELECT count(*) FROM pages")  # attached: DuckDB names the catalog it cannot reach
    message = str(caught.value)
    dsn = password_catalog.removeprefix("postgres:")
    assert f'Unable to connect to Postgres at "{dsn.replace(CATALOG_PASSWORD, "***")}": ' in message
    assert CATALOG_PASSWORD not in message
    assert caught.value.__suppress_context__  # the original is not chained to it
    assert store.query("SELECT url FROM pages") == [(f"{SITE}/a",)]  # back once the catalog is


def test_a_lake_whose_catalog_went_away_does_not_stop_another_lake_from_opening(postgres_url, store_settings,
                                                                                   tmp_path):
    import psycopg2  # noqa: PLC0415 - only this test drops a catalog database

    dbname = postgres_url.rsplit("/", 1)[1]
    gone = CrawlStore(LakeLocation(lake_catalog(postgres_url), f"{tmp_path / 'pg'}/"))
    land_pages(gone, "gone", [f"{SITE}/gone"])
    admin = psycopg2.connect(postgres_url.rsplit("/", 1)[0] + "/postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
    admin.close()

    other = CrawlStore.from_settings(store_settings)  # attached in the same process as the lost lake
    assert land_pages(other, "other", [f"{SITE}/other"]).new_versions == 1
    assert other.query("SELECT url FROM pages") == [(f"{SITE}/other",)]


def test_a_relative_lake_path_names_the_lake_as_its_absolute_path_does(tmp_path, monkeypatch):
    """`up` resolves its paths for its processes, a CLI in the same folder may not: DuckLake refuses
    a data path spelt differently from the one the lake was created with, so both must agree."""
    monkeypatch.chdir(tmp_path)
    relative = LakeLocation.from_settings(Settings(lake_path=Path("data/lake")))
    absolute = LakeLocation.from_settings(Settings(lake_path=tmp_path / "data" / "lake"))
    assert relative == absolute
    assert absolute.data_path == f"{tmp_path / 'data' / 'lake' / 'data'}/"
    assert LakeLocation.from_settings(Settings(lake_path=tmp_path, lake_data_path="parquet")).data_path == \
        f"{tmp_path / 'parquet'}/"


CREATE_RELATIVE_LAKE = """
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from tests.unit.crawl_rows import fetch_result, land, page_html
store = CrawlStore(LakeLocation("sqlite:lake/catalog.sqlite", "lake/data/"))
land(store, "b1", [FrontierURL("lake", "http://lake.test/old", 0)],
     [fetch_result("http://lake.test/old", page_html("old"))])
"""


def test_a_lake_created_with_a_relative_data_path_opens_by_its_absolute_path_and_only_its_own(tmp_path):
    """Lakes made before paths were absolute hold a relative data path: the same folder spelt
    absolutely opens them; another folder is still refused in one line."""
    repo = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", CREATE_RELATIVE_LAKE], cwd=tmp_path, check=True,
                   env={**os.environ, "PYTHONPATH": str(repo)})
    catalog = f"sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    store = CrawlStore(LakeLocation(catalog, f"{tmp_path / 'lake' / 'data'}/"))
    assert store.query("SELECT url FROM pages") == [("http://lake.test/old",)]
    land_pages(store, "b2", [f"{SITE}/new"])
    assert store.query("SELECT count(*) FROM pages") == [(2,)]
    elsewhere = CrawlStore(LakeLocation(catalog, f"{tmp_path / 'other'}/"))
    with pytest.raises(StoreUnavailableError, match="does not match existing data path"):
        elsewhere.query("SELECT count(*) FROM pages")


MEMORY_PROBE = """
import json, sys, tempfile
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
store = CrawlStore.from_settings(Settings(lake_path=sys.argv[1]))
limit, spill = store.query("SELECT current_setting('memory_limit'), current_setting('temp_directory')")[0]
# About 700 MB of distinct strings: more than the limit, so DuckDB spills rather than fail.
(distinct,), = store.query("SELECT count(DISTINCT s) FROM (SELECT md5(i::VARCHAR) || repeat('x', 200) AS s "
                           "FROM range(3000000) t(i))")
print(json.dumps([limit, spill, distinct, tempfile.gettempdir()]))
"""


def test_each_process_s_lake_engine_keeps_to_the_memory_limit_and_spills_beyond_it(tmp_path):
    """CRAWL_LAKE_MEMORY_LIMIT bounds the DuckDB of a process that opens the lake (DuckDB's own
    default is 80 % of the machine), and a query needing more spills into a folder of its own."""
    import json  # noqa: PLC0415

    env = {**os.environ, "CRAWL_LAKE_MEMORY_LIMIT": "128MB"}
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(tmp_path / "lake")], env=env,
                          capture_output=True, text=True, check=True, timeout=240)
    limit, spill, distinct, temp = json.loads(done.stdout.strip().splitlines()[-1])
    assert limit == "122.0 MiB"  # DuckDB's spelling of 128 MB
    assert distinct == 3_000_000
    assert Path(spill).parent == Path(temp)
    assert Path(spill).name.startswith("crawl-platform-duckdb-")

