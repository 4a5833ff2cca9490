"""``crawl-platform sql``: a DuckDB session on the lake, for one query or a small shell.

The session is a DuckDB connection of its own, not the store's shared instance: the lake is
attached under the name ``lake`` and selected with ``USE lake``, so ``SELECT * FROM pages`` and
``lake.table_changes(...)`` work as the README shows, and what a user creates stays in the session.
Unless asked to write, the session is read-only, and not just the lake's tables: it reads no file
but the lake's, opens no other database and loads no extension, and each statement is checked
before it runs (:mod:`crawl_platform.store.lockdown`); a refused one is one line saying why.
Writes take the lake's write lock statement by statement (:meth:`CrawlStore.lake_write_lock`),
so they take turns with the crawl's writers. The
``duckdb`` package has no shell, so :func:`run_shell` is a small line loop: a statement ends with
``;``, ``.quit`` or the end of input leaves. Results go to a :class:`ResultPrinter`.
The CLI (:mod:`crawl_platform.cli.lake`) wires the three.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import duckdb
from rich.console import Console
from rich.table import Table
from rich.text import Text

from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.store.location import LAKE, LakeLocation
from crawl_platform.store.lockdown import lock_down, refusal
from crawl_platform.store.transfer import connect, one_line

PROMPT = "lake> "
CONTINUATION = "  ...> "
TABLE_ROWS = 1000  # a terminal table shows at most this many rows; --csv prints them all
CHUNK = 10_000
Format = Literal["table", "plain", "csv"]

READ_ONLY_HINT = "read-only session; use --write"
# DuckDB's words when the read-only attach or the lockdown stops a statement.
_LOCKED_OUT = ("read-only mode", "disabled by configuration", "disabled through configuration",
               "the configuration has been locked")

HELP = """Statements end with ';' and may span lines. The lake is attached as `lake` and in use.
.tables   the lake's tables
.help     this text
.quit     leave (also .exit, Ctrl-D)"""


class QueryError(RuntimeError):
    """A statement failed; ``str(err)`` is DuckDB's message as one line (the CLI exits 1)."""


class ResultPrinter:
    """Prints each statement's result: a rich table (the first :data:`TABLE_ROWS` rows), plain
    tab-separated rows with a header line (one row a line: tabs and newlines in values escaped,
    NULL as ``NULL``), or CSV (NULL as an empty field)."""

    def __init__(self, out: TextIO, fmt: Format) -> None:
        self.out = out
        self.fmt = fmt

    def rows(self, names: Sequence[str], chunks: Iterator[list[tuple[Any, ...]]]) -> None:
        if self.fmt == "csv":
            writer = csv.writer(self.out, lineterminator="\n")
            writer.writerow(names)
            for chunk in chunks:
                writer.writerows(chunk)
        elif self.fmt == "plain":
            self.out.write("\t".join(names) + "\n")
            for chunk in chunks:
                self.out.writelines("\t".join(_plain(v) for v in row) + "\n" for row in chunk)
        else:
            self._table(names, chunks)
        self.out.flush()

    def changed(self, count: int) -> None:
        self.out.write(f"{count} row{'s' if count != 1 else ''} changed\n")
        self.out.flush()

    def _table(self, names: Sequence[str], chunks: Iterator[list[tuple[Any, ...]]]) -> None:
        table = Table(*names)
        shown = total = 0
        for chunk in chunks:
            total += len(chunk)
            for row in chunk[: max(0, TABLE_ROWS - shown)]:
                table.add_row(*(Text("NULL", style="dim") if v is None else Text(str(v)) for v in row))
                shown += 1
        console = Console(file=self.out, soft_wrap=False)
        console.print(table)
        more = f", the first {shown} shown (--csv prints all)" if total > shown else ""
        console.print(f"{total} row{'s' if total != 1 else ''}{more}", highlight=False)


def _plain(value: object) -> str:
    if value is None:
        return "NULL"
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


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

    def run(self, sql: str, printer: ResultPrinter) -> None:
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


def _show(result: _Result | None, printer: ResultPrinter) -> None:
    if result is None:
        return
    if result.chunks is not None:
        printer.rows(result.names, result.chunks)
    elif result.changed is not None:
        printer.changed(result.changed)


def _chunks(result: duckdb.DuckDBPyConnection) -> Iterator[list[tuple[Any, ...]]]:
    while chunk := result.fetchmany(CHUNK):
        yield chunk


def run_shell(session: LakeSession, read_line: Callable[[str], str], printer: ResultPrinter,
              err: TextIO) -> int:
    """Read statements with ``read_line(prompt)`` (which raises EOFError at the end of input)
    until ``.quit``; run each once it ends with ``;`` and print its result, or its error as one
    line on ``err``. Returns how many statements failed."""
    failed = 0
    buffer: list[str] = []
    while True:
        try:
            line = read_line(CONTINUATION if buffer else PROMPT)
        except EOFError:
            break
        except KeyboardInterrupt:  # Ctrl-C drops the statement being typed, as shells do
            buffer = []
            err.write("\n")
            continue
        if not buffer and line.strip().startswith("."):
            command = line.strip().split()[0]
            if command in (".quit", ".exit"):
                break
            if command == ".tables":
                buffer = ["SHOW TABLES;"]
            else:
                err.write(HELP + "\n" if command == ".help" else f"unknown command {command} (try .help)\n")
                continue
        else:
            buffer.append(line)
        if "\n".join(buffer).rstrip().endswith(";"):
            failed += _run_one(session, "\n".join(buffer), printer, err)
            buffer = []
    if "\n".join(buffer).strip():  # the end of input ends the last statement too
        failed += _run_one(session, "\n".join(buffer), printer, err)
    return failed


def _run_one(session: LakeSession, sql: str, printer: ResultPrinter, err: TextIO) -> int:
    try:
        session.run(sql, printer)
    except (QueryError, StoreBusyError) as exc:
        err.write(f"{exc}\n")
        err.flush()
        return 1
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 1
    return 0


def stream_reader(stream: TextIO) -> Callable[[str], str]:
    """A ``read_line`` for :func:`run_shell` over a script on ``stream`` (no prompts)."""

    def read_line(_prompt: str) -> str:
        line = stream.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    return read_line


def terminal_reader() -> Callable[[str], str]:
    """A ``read_line`` for a person at a terminal: prompts, line editing and history (readline)."""
    with suppress(ImportError):  # platforms without readline still get a plain prompt
        import readline  # noqa: F401, PLC0415 - imported for its effect on input()
    return input


def default_format(out: TextIO = sys.stdout) -> Format:
    """A table on a terminal, plain rows in a pipe."""
    return "table" if out.isatty() else "plain"
