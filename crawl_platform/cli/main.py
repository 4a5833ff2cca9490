"""The ``crawl-platform`` command line of the engine: its parser, its dispatch and its one-line error contract.

The commands live in their modules: ``crawl``, ``schedule``, ``cancel``/``pause``/``resume`` and
``status`` in :mod:`crawl_platform.cli.crawls`, the lake commands ``sql``, ``backup``, ``restore``
and ``migrate`` in :mod:`crawl_platform.cli.lake`, the archive commands ``show`` and ``export`` in
:mod:`crawl_platform.cli.archive`, and ``extract`` in :mod:`crawl_platform.cli.extract`.

A contract other tools rely on: user mistakes print one line to stderr and exit 2, an
unreachable broker or busy store prints one line and exits 1, never a traceback
(:mod:`crawl_platform.cli.exits`). The commands that start Dagster processes (``up``,
``worker``) are added by the Dagster layer (:mod:`crawl_platform_dagster.cli`) through
``extra_commands``, so this package never knows the orchestrator; the installed
``crawl-platform`` script is that module's ``main``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError

from crawl_platform.bus.base import BusError
from crawl_platform.bus.broker import BrokerStartError
from crawl_platform.cli import archive, crawls, extract, lake
from crawl_platform.cli.exits import EXIT_UNAVAILABLE, EXIT_USAGE, fail
from crawl_platform.config import Settings
from crawl_platform.extract.rules import RulesError
from crawl_platform.extract.rules import UnknownCrawlError as UnknownRulesCrawlError
from crawl_platform.pipeline.control import ACTIONS
from crawl_platform.storage import StorageError
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.store.extensions import ExtensionError
from crawl_platform.store.session import QueryError
from crawl_platform.store.transfer import TransferFailedError, TransferRefusedError


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes as one line on stderr and exit 2 (argparse prints the whole usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


@dataclass(frozen=True)
class Command:
    """A subcommand another layer adds: its help, how it declares its arguments, and how it runs
    (returning the exit code)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Settings, argparse.Namespace], int]


def _parser(settings: Settings, extra_commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="crawl-platform",
        description="Distributed web crawler on Kafka, Dagster and DuckDB. Settings come from "
        "environment variables (docs/settings.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for name, command in extra_commands.items():
        command.add_arguments(sub.add_parser(name, help=command.help))
    crawls.add_arguments(sub, settings)

    sql = sub.add_parser("sql", help="query the lake with DuckDB: one query (-c) or a shell on stdin")
    sql.add_argument("-c", dest="query", metavar="QUERY", help="run these statements, print the results, exit")
    sql.add_argument("--write", action="store_true",
                     help="attach the lake read-write and run any statement (default: read the lake, nothing else)")
    sql.add_argument("--csv", action="store_true", help="print results as CSV")
    backup = sub.add_parser("backup", help="copy the lake as of one snapshot into a new folder")
    backup.add_argument("dest", metavar="DEST", help="a new or empty folder, or s3://bucket/prefix/")
    backup.add_argument("--snapshot", type=int, metavar="N", help="the snapshot to copy (default: the latest)")
    restore = sub.add_parser("restore", help="land a backup into the lake, checked against its manifest")
    restore.add_argument("src", metavar="SRC", help="a folder written by backup, or its s3:// URL")
    restore.add_argument("--lake-path", type=Path, metavar="PATH",
                         help="restore into the embedded lake at PATH (default: the configured lake)")
    restore.add_argument("--force", action="store_true", help="replace the lake's crawl data if it holds any")
    migrate = sub.add_parser("migrate", help="import an old single-file store (crawl.duckdb) into the lake")
    migrate.add_argument("file", metavar="FILE.duckdb", help="the old store, opened read-only")
    migrate.add_argument("--force", action="store_true", help="replace the lake's crawl data if it holds any")
    archive.add_arguments(sub)
    extract.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None, extra_commands: Mapping[str, Command] | None = None) -> int:
    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"])
        return fail(f"invalid setting {name}={first.get('input')!r}: {first['msg']}", EXIT_USAGE)
    extra = dict(extra_commands or {})
    args = _parser(settings, extra).parse_args(argv)
    try:
        if args.command in extra:
            return extra[args.command].run(settings, args)
        with _without_pandas(args.command in _NO_PANDAS_COMMANDS):
            return _dispatch(settings, args)
    except (BusError, StoreBusyError, BrokerStartError, StoreUnavailableError, QueryError,
            TransferFailedError, StorageError) as exc:
        return fail(str(exc), EXIT_UNAVAILABLE)
    except (ExtensionError, TransferRefusedError, RulesError, UnknownRulesCrawlError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return 130


# The commands that never hand DuckDB or pyarrow a pandas object, and never ask for one back.
_NO_PANDAS_COMMANDS = frozenset({"status", "crawl", "schedule", *ACTIONS})


class _NoPandas(importlib.abc.MetaPathFinder):
    """Answers ``import pandas`` with ModuleNotFoundError, as where pandas is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@contextlib.contextmanager
def _without_pandas(enabled: bool) -> Iterator[None]:
    """Run a command as if pandas were not installed. DuckDB imports it at a process's first
    statement with a parameter, and pyarrow at its first array, only to recognise pandas values
    among the arguments; both go on without it, and the import is a large share of a short
    command's CPU, ``crawl --wait``'s included (see docs/benchmarks.md). Nothing is blocked once
    pandas is imported (a test process), and the finder goes when the command ends."""
    if not enabled or "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _dispatch(settings: Settings, args: argparse.Namespace) -> int:
    """Run the command ``args`` names, in its module: the crawl commands', the lake's, the
    archive's or extraction's."""
    commands: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
        **crawls.COMMANDS, "extract": extract.run, **lake.COMMANDS, **archive.COMMANDS,
    }
    return commands[args.command](settings, args)


if __name__ == "__main__":
    sys.exit(main())
