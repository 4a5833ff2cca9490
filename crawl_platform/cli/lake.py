"""The lake commands of ``crawl-platform``: ``sql``, ``backup``, ``restore`` and ``migrate``.

:mod:`crawl_platform.cli.main` declares their arguments and dispatches to :data:`COMMANDS`; each
function here runs one command and returns its exit code. The work is done by
:mod:`~crawl_platform.store.session` (printed by :mod:`~crawl_platform.cli.shell`),
:mod:`~crawl_platform.lake.backup` and :mod:`~crawl_platform.lake.migrate`, and its failures
arrive as the store's exceptions, which
``main`` turns into one line on stderr: a refusal (``TransferRefusedError``) exits 2, a failed
query or copy and an unavailable lake exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from crawl_platform.cli.shell import ResultPrinter, default_format, run_shell, stream_reader, terminal_reader
from crawl_platform.config import Settings
from crawl_platform.lake.backup import backup_lake, restore_lake
from crawl_platform.lake.migrate import migrate_file
from crawl_platform.storage import ObjectStore, open_folder
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.schema import TABLES
from crawl_platform.store.session import LakeSession
from crawl_platform.store.transfer import TableFingerprint


def sql(settings: Settings, args: argparse.Namespace) -> int:
    """``-c``: run the statements, print their results, exit 0 (a failing one raises QueryError).
    Otherwise a shell on stdin: at a terminal it prompts and always exits 0; a script piped in
    exits 1 when any statement failed."""
    session = LakeSession.open(CrawlStore.from_settings(settings), write=args.write)
    try:
        printer = ResultPrinter(sys.stdout, "csv" if args.csv else default_format(sys.stdout))
        if args.query is not None:
            session.run(args.query, printer)
            return 0
        interactive = sys.stdin.isatty()
        if interactive:
            mode = "read-write" if args.write else "read-only"
            print(f"lake {session.catalog} attached as `lake` ({mode}); statements end with ';', .help, .quit",
                  file=sys.stderr)
        read_line = terminal_reader() if interactive else stream_reader(sys.stdin)
        failed = run_shell(session, read_line, printer, sys.stderr)
        return 1 if failed and not interactive else 0
    finally:
        session.close()


def backup(settings: Settings, args: argparse.Namespace) -> int:
    dest = open_folder(args.dest, ObjectStore.from_settings(settings))
    manifest = backup_lake(CrawlStore.from_settings(settings), dest, args.snapshot)
    print(f"backed up snapshot {manifest.snapshot_id} ({manifest.snapshot_time}) of {manifest.source} "
          f"to {args.dest}: {_rows(manifest.tables)}")
    return 0


def restore(settings: Settings, args: argparse.Namespace) -> int:
    if args.lake_path is not None:  # an embedded lake there, whatever CRAWL_LAKE_CATALOG says
        settings = settings.model_copy(update={"lake_path": Path(args.lake_path), "lake_catalog": "",
                                               "lake_data_path": "", "archive_path": ""})
    target = LakeLocation.from_settings(settings)
    manifest = restore_lake(open_folder(args.src, ObjectStore.from_settings(settings)), target, replace=args.force,
                            archive=CrawlStore.from_settings(settings).archive)
    print(f"restored snapshot {manifest.snapshot_id} ({manifest.snapshot_time}) of {manifest.source} "
          f"into {target.shown_catalog}: {_rows(manifest.tables)}")
    return 0


def migrate(settings: Settings, args: argparse.Namespace) -> int:
    store = CrawlStore.from_settings(settings)
    done = migrate_file(Path(args.file), store, replace=args.force)
    print(f"imported {args.file} into {store.location.shown_catalog}: {_rows(done.tables)}")
    if args.force:
        print(f"the lake's earlier contents stay readable AT (VERSION => {done.previous_snapshot_id})")
    return 0


def _rows(tables: Mapping[str, TableFingerprint]) -> str:
    return ", ".join(f"{name} {tables[name].rows}" for name in TABLES if name in tables) + " rows"


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "sql": sql, "backup": backup, "restore": restore, "migrate": migrate,
}
