"""A DuckDB session of its own on the lake, for ``crawl-platform sql``: one statement at a time, results streamed.

The session is a DuckDB connection of its own, not the store's shared instance: the lake is
attached under the name ``lake`` and selected with ``USE lake``, so ``SELECT * FROM pages`` and
``lake.table_changes(...)`` work as docs/operations.md shows, and what a user creates stays in the session.
Unless asked to write, the session is read-only, and not just the lake's tables: it reads no file
but the lake's, opens no other database and loads no extension, and each statement is checked
before it runs (:mod:`.lockdown`); a refused one is one line saying why. Writes take the lake's
write lock statement by statement (:meth:`CrawlStore.lake_write_lock`), so they take turns with
the crawl's writers. Results go to a :class:`ResultSink`; the shell and its printer are
:mod:`crawl_platform.cli.shell`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import duckdb

from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreUnavailableError
from crawl_platform.store.location import LAKE, LakeLocation
from crawl_platform.store.lockdown import lock_down, refusal
from crawl_platform.store.transfer import connect, one_line

CHUNK = 10_000  # rows fetched from DuckDB at a time
READ_ONLY_HINT = "read-only session; use --write"
# DuckDB's words when the read-only attach or the lockdown stops a statement.
_LOCKED_OUT = ("read-only mode", "disabled by configuration", "disabled through configuration",
               "the configuration has been locked")


class QueryError(RuntimeError):
    """A statement failed; ``str(err)`` is DuckDB's message as one line (the CLI exits 1)."""


class ResultSink(Protocol):
    """Where a session's results go (:class:`crawl_platform.cli.shell.ResultPrinter` prints them)."""

    def rows(self, names: Sequence[str], chunks: Iterator[list[tuple[Any, ...]]]) -> None:
        """A statement's rows: its column ``names``, then the rows chunk by chunk as DuckDB produces them."""

    def changed(self, count: int) -> None:
        """An ``INSERT``, ``UPDATE`` or ``DELETE`` changed ``count`` rows."""


class LakeSession:
    """A DuckDB connection with the lake attached as ``lake`` and in use. ``write_lock`` (None
    when read-only) is held around each statement."""

    def __init__(self, con: duckdb.DuckDBPyConnection, location: LakeLocation,
                 write_lock: Callable[[], AbstractContextManager[None]] | None = None) -> None:
        self.con = con
        self.location = location
        self.write_lock = write_lock

    @property
    def catalog(self) -> str:
        """The lake's catalog as it may be shown (without its password)."""
        return self.location.shown_catalog

    @classmethod
    def open(cls, store: CrawlStore, *, write: bool = False) -> LakeSession:
        """Attach the lake of ``store`` (which must exist) in a new DuckDB connection; read-only
        unless ``write``. Raises :class:`StoreUnavailableError` when it cannot be attached."""
        location = store.location
        if not store.exists():
            raise StoreUnavailableError(f"there is no lake at {location.shown_catalog} yet "
                                        "(nothing has landed, or CRAWL_LAKE_PATH points elsewhere)")
        con = connect(location.kind)
        try:
            con.execute(location.attach_sql(read_only=not write, alias=LAKE))
            con.execute(f"USE {LAKE}")
            if not write:
                lock_down(con, location)
        except duckdb.Error as err:
            con.close()
            message = f"cannot open the lake {location.catalog}: {one_line(err)}"
            raise StoreUnavailableError(location.scrub(message)) from None
        except BaseException:
            con.close()
            raise
        return cls(con, location, store.lake_write_lock if write else None)

    def run(self, sql: str, printer: ResultSink) -> None:
        """Run every statement in ``sql`` in turn and print each result; the first that fails, or
        that a read-only session refuses, raises :class:`QueryError` (statements before it stay
        done)."""
        read_only = self.write_lock is None
        try:
            # Parsed by the session itself: a PRAGMA that reads files (import_database) runs here.
            statements = self.con.extract_statements(sql)
        except duckdb.Error as err:
            raise QueryError(_message(err, read_only)) from None
        for statement in statements:
            try:
                if self.write_lock is None:
                    reason = refusal(self.con, statement)
                    if reason is not None:
                        raise QueryError(f"read-only session: {reason}; use --write")
                    _show(self._execute(statement), printer)  # streamed as DuckDB produces it
                else:
                    with self.write_lock():  # read all of it under the lock, print after
                        result = self._execute(statement)
                        if result is not None and result.chunks is not None:
                            result = _Result(result.names, iter(list(result.chunks)), None)
                    _show(result, printer)
            except duckdb.Error as err:
                raise QueryError(self.location.scrub(_message(err, read_only))) from None

    def _execute(self, statement: duckdb.Statement) -> _Result | None:
        result = self.con.execute(statement)
        if self.con.description is None:
            return None
        if statement.type.name in ("INSERT", "UPDATE", "DELETE"):
            row = result.fetchone()
            return _Result([], None, int(row[0]) if row else 0)
        expected = statement.expected_result_type
        if expected and expected[0] == duckdb.ExpectedResultType.QUERY_RESULT:
            return _Result([str(d[0]) for d in self.con.description], _chunks(result), None)
        return None  # DDL, SET, transactions: nothing to show

    def close(self) -> None:
        self.con.close()


def _message(err: duckdb.Error, read_only: bool) -> str:
    """DuckDB's error as one line, saying so when it is the read-only session that stopped it."""
    message = one_line(err)
    if read_only and any(words in message for words in _LOCKED_OUT):
        message += f" ({READ_ONLY_HINT})"
    return message


@dataclass(frozen=True)
class _Result:
    """What a statement gave: rows (``names`` and ``chunks``) or a count of changed rows."""

    names: list[str]
    chunks: Iterator[list[tuple[Any, ...]]] | None
    changed: int | None


def _show(result: _Result | None, printer: ResultSink) -> None:
    if result is None:
        return
    if result.chunks is not None:
        printer.rows(result.names, result.chunks)
    elif result.changed is not None:
        printer.changed(result.changed)


def _chunks(result: duckdb.DuckDBPyConnection) -> Iterator[list[tuple[Any, ...]]]:
    while chunk := result.fetchmany(CHUNK):
        yield chunk
