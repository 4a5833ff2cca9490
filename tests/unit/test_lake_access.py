"""Read-only access for analysts (docs/access.md), on a lake with a PostgreSQL catalog.

The SQL that creates the reader role is read from the deployment guide itself, so the guide and
what is tested cannot drift apart. An owner role (what the guide calls ``crawler``) owns the
catalog database and lands a few pages; the guide's grants make a reader; in a fresh DuckDB the
reader attaches the lake read-only and sees the rows, including a table created after the grants,
and cannot write, with ``READ_ONLY`` or without it (then PostgreSQL refuses the commit). Roles
are cluster-wide, so both get a unique name and are dropped afterwards.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg2
import pytest

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.extensions import load_extensions
from crawl_platform.store.location import LakeLocation
from tests.unit.crawl_rows import fetch_result, land, page_html

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "access.md"
URLS = [f"http://access.test/p{k}" for k in range(3)]


def guide_reader_sql() -> str:
    """The first ``sql`` block of the analysts' access page."""
    return GUIDE.read_text().split("```sql\n", 1)[1].split("```", 1)[0]


def for_this_test(sql: str, database: str, owner: str, reader: str) -> str:
    """The guide's SQL with its names (database crawl, roles crawler and crawl_reader) replaced."""
    sql = re.sub(r"\bDATABASE crawl\b", f'DATABASE "{database}"', sql)
    sql = re.sub(r"\bcrawl_reader\b", reader, sql)
    return re.sub(r"\bcrawler\b", owner, sql)


@pytest.fixture
def roles(postgres_url: str) -> Iterator[tuple[str, str, str]]:
    """(database, owner, reader): the test database, owned by a new owner role, and the name of
    the reader role the test creates. Both roles are dropped afterwards."""
    database = postgres_url.rsplit("/", 1)[1]
    tag = uuid.uuid4().hex[:10]
    owner, reader = f"crawl_owner_{tag}", f"crawl_reader_{tag}"
    admin = psycopg2.connect(postgres_url)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE ROLE {owner} LOGIN")
            cur.execute(f'ALTER DATABASE "{database}" OWNER TO {owner}')  # owns schema public's CREATE too
        yield database, owner, reader
    finally:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{database}" OWNER TO CURRENT_USER')
            cur.execute(f"SELECT 1 FROM pg_roles WHERE rolname = '{reader}'")
            names = [reader, owner] if cur.fetchone() else [owner]
            for name in names:  # one at a time: dropping a default ACL's grantor and grantee together fails
                cur.execute(f"DROP OWNED BY {name}")
                cur.execute(f"DROP ROLE {name}")
        admin.close()


def reader_duckdb(location: LakeLocation, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A fresh DuckDB, as an analyst's, with the lake attached as ``lake``."""
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    load_extensions(con, "postgres")
    con.execute(location.attach_sql(read_only=read_only, alias="lake"))
    return con


def insert_page(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""INSERT INTO lake.pages (url, crawl_id, version, status, fetched_at, content_hash, batch_id,
                                          content_length, elapsed_ms)
                   VALUES ('http://access.test/intruder', 'x', 1, 200, now()::TIMESTAMP, 'h', 'b', 0, 1.0)""")


def test_the_guides_reader_role_reads_the_lake_and_cannot_write_it(roles, postgres_url, tmp_path):
    database, owner, reader = roles
    data_path = f"{tmp_path / 'data'}/"
    owner_store = CrawlStore(LakeLocation(f"postgres:dbname={database} host=127.0.0.1 user={owner}", data_path))
    owner_store.ensure_schema()
    land(owner_store, "b1", [FrontierURL("access", u, 0) for u in URLS],
         [fetch_result(u, page_html(f"page {u}")) for u in URLS])
    landed = sorted(owner_store.query("SELECT url, version, content_hash FROM pages"))
    assert [row[0] for row in landed] == URLS

    admin = psycopg2.connect(postgres_url)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(for_this_test(guide_reader_sql(), database, owner, reader))
    admin.close()
    # DuckLake adds catalog tables as the lake changes: the default privileges cover them.
    with owner_store.write() as con:
        con.execute("CREATE TABLE notes AS SELECT 'added after the grants' AS note")
    owner_store.close()

    reader_location = LakeLocation(f"postgres:dbname={database} host=127.0.0.1 user={reader}", data_path)
    con = reader_duckdb(reader_location, read_only=True)
    try:
        assert sorted(con.execute("SELECT url, version, content_hash FROM lake.pages").fetchall()) == landed
        assert con.execute("SELECT note FROM lake.notes").fetchall() == [("added after the grants",)]
        with pytest.raises(duckdb.InvalidInputException, match="attached in read-only mode"):
            insert_page(con)
    finally:
        con.close()

    # Attached without READ_ONLY, the write gets as far as the commit, where the catalog refuses it.
    con = reader_duckdb(reader_location, read_only=False)
    try:
        with pytest.raises(duckdb.Error, match="permission denied for table ducklake_snapshot"):
            insert_page(con)
        assert sorted(con.execute("SELECT url, version, content_hash FROM lake.pages").fetchall()) == landed
    finally:
        con.close()
