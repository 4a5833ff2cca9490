"""Rows bound to a DuckDB statement by name (crawl_platform/store/bind.py): a few as list parameters,
many as an Arrow table, the same relation either way, inside the lake's transactions."""

from __future__ import annotations

import duckdb
import pytest

from crawl_platform.store.bind import FEW_ROWS, bound_rows


def _columns(n: int) -> dict[str, tuple[str, list[object]]]:
    return {"url": ("VARCHAR", [f"http://h{i % 3}/p{i}" for i in range(n)]),
            "depth": ("INTEGER", [i % 5 for i in range(n)])}


@pytest.mark.parametrize("n", [1, FEW_ROWS, FEW_ROWS + 1, 2000])
def test_few_and_many_rows_bind_as_the_same_typed_relation_and_are_gone_after(store, n):
    columns = _columns(n)
    with store.write() as con:
        with bound_rows(con, "wanted", columns):
            rows = con.execute("SELECT url, depth FROM wanted ORDER BY depth, url").fetchall()
            types = [row[:2] for row in con.execute("DESCRIBE wanted").fetchall()]
            # joined with a lake table in the same write transaction, as admission does
            con.execute("INSERT INTO batch_items SELECT 'b', 'c', url, depth, 'fetched' FROM wanted")
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT count(*) FROM wanted")
    expected = sorted(zip(*(values for _, values in columns.values()), strict=True), key=lambda r: (r[1], r[0]))
    assert rows == expected
    assert types == [("url", "VARCHAR"), ("depth", "INTEGER")]
    assert store.query("SELECT count(*), sum(depth) FROM batch_items") == [(n, sum(columns["depth"][1]))]


def test_a_failed_statement_leaves_neither_the_rows_nor_the_lake_write_behind(store):
    def fail_halfway() -> None:
        with store.write() as con, bound_rows(con, "wanted", _columns(3)):
            con.execute("INSERT INTO batch_items SELECT 'b', 'c', url, depth, 'fetched' FROM wanted")
            con.execute("SELECT no_such_column FROM wanted")

    with pytest.raises(duckdb.Error):
        fail_halfway()
    assert store.query("SELECT count(*) FROM batch_items") == [(0,)]
    with store.write() as con, bound_rows(con, "wanted", _columns(2)):  # the name is free again
        assert con.execute("SELECT count(*) FROM wanted").fetchall() == [(2,)]


def test_rows_bind_in_a_read_transaction_too(store):
    with store.read() as con, bound_rows(con, "items", _columns(4)):
        assert con.execute("SELECT count(DISTINCT url) FROM items").fetchall() == [(4,)]


def test_only_the_types_both_ways_agree_on_are_accepted(store):
    with pytest.raises(ValueError, match="VARCHAR and INTEGER"), store.write() as con, \
            bound_rows(con, "wanted", {"at": ("TIMESTAMP", [])}):
        pass
