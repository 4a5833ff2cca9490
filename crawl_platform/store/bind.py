"""Python rows handed to a DuckDB statement as a relation of a given name, for the length of a block.

Arrow is the fast way in for many rows: thousands of URLs bind many times faster as an Arrow table
than as list parameters. But a process's first scan of an Arrow table makes DuckDB import
``pyarrow.dataset`` and ``pyarrow.compute``, on top of pyarrow and numpy themselves, which a
``crawl-platform crawl`` that registers a handful of seeds would pay on every call. Up to
:data:`FEW_ROWS` rows therefore go in as list parameters, unnested into a temporary table of the
caller's transaction; more go in as an Arrow table (imported only then). What that spares one
``crawl URL`` is measured by ``benchmarks/cli_cost.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import duckdb

FEW_ROWS = 64
"""Up to this many rows are bound as list parameters (a crawl's seeds; a few URLs the broker
confirmed), more as an Arrow table, which pays off only from somewhat more rows than this."""

_ARROW_TYPES = ("VARCHAR", "INTEGER")


@contextmanager
def bound_rows(con: duckdb.DuckDBPyConnection, name: str,
               columns: Mapping[str, tuple[str, Sequence[object]]]) -> Iterator[None]:
    """Within the block, ``name`` is a relation of ``columns`` (column name -> (DuckDB type, values),
    each of the same length; ``VARCHAR`` or ``INTEGER``). It is dropped when the block ends without
    an error (an error ends the caller's transaction, which drops a temporary table with it)."""
    if any(sql_type not in _ARROW_TYPES for sql_type, _ in columns.values()):
        raise ValueError(f"bound_rows binds {' and '.join(_ARROW_TYPES)} columns only")
    rows = min((len(values) for _, values in columns.values()), default=0)
    if rows <= FEW_ROWS:
        unnested = ", ".join(f"unnest(${i}::{sql_type}[]) AS {column}"
                             for i, (column, (sql_type, _)) in enumerate(columns.items(), 1))
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {unnested}",
                    [list(values) for _, values in columns.values()])
        yield
        con.execute(f"DROP TABLE temp.{name}")
        return
    import pyarrow as pa  # noqa: PLC0415 - a process that binds only a few rows never needs it

    types = {"VARCHAR": pa.string(), "INTEGER": pa.int32()}
    con.register(name, pa.table({column: pa.array(values, types[sql_type])
                                 for column, (sql_type, values) in columns.items()}))
    yield
    con.unregister(name)
