"""``crawl-platform sql``'s shell: statements read line by line, each result printed.

The session is the store's (:class:`crawl_platform.store.session.LakeSession`: a DuckDB connection
of its own with the lake attached as ``lake``, read-only unless asked to write). The ``duckdb``
package has no shell, so :func:`run_shell` is a small line loop: a statement ends with ``;``,
``.quit`` or the end of input leaves. Results go to a :class:`ResultPrinter`: a table at a
terminal, plain rows in a pipe, or CSV. The CLI (:mod:`crawl_platform.cli.lake`) wires the three.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from crawl_platform.store.errors import StoreBusyError
from crawl_platform.store.session import LakeSession, QueryError

PROMPT = "lake> "
CONTINUATION = "  ...> "
TABLE_ROWS = 1000  # a terminal table shows at most this many rows; --csv prints them all
Format = Literal["table", "plain", "csv"]

HELP = """Statements end with ';' and may span lines. The lake is attached as `lake` and in use.
.tables   the lake's tables
.help     this text
.quit     leave (also .exit, Ctrl-D)"""


class ResultPrinter:
    """Prints each statement's result (a :class:`~crawl_platform.store.session.ResultSink`): a
    rich table (the first :data:`TABLE_ROWS` rows), plain tab-separated rows with a header line
    (one row a line: tabs and newlines in values escaped, NULL as ``NULL``), or CSV (NULL as an
    empty field)."""

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
