"""The archive commands of ``crawl-platform``: ``show`` (a stored response) and ``export`` (a crawl's data).

:func:`add_arguments` declares their arguments and :mod:`crawl_platform.cli.main` dispatches to
:data:`COMMANDS`. ``show`` reads the lake and the raw archive only
(:mod:`crawl_platform.archive.reader`), never the network; ``export`` runs
:func:`crawl_platform.archive.export.export_crawl` behind a rich progress bar.
Both import the archive's modules (FastWARC, ``requests`` through the writer) only when they run,
so that ``crawl`` and the other commands do not pay for importing them at start.
Bad input (an unknown URL, version, crawl, format or table, a folder that cannot be written)
prints one line and exits 2; an archive file that cannot be read exits 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from crawl_platform.cli.exits import EXIT_UNAVAILABLE, EXIT_USAGE, fail
from crawl_platform.config import Settings
from crawl_platform.store import pages
from crawl_platform.store.database import CrawlStore
from crawl_platform.urls import InvalidURLError, canonicalize


class _NothingStoredError(Exception):
    """``show`` has nothing to print; ``str`` is the one-line reason (exit 2)."""


def show(settings: Settings, args: argparse.Namespace) -> int:
    """Print the stored response of the URL's version (default: its latest, of ``--crawl-id`` if
    given): status line, headers, a blank line, the body as stored (decoded)."""
    from crawl_platform.archive.reader import ArchiveReadError, read_stored  # noqa: PLC0415 - see the docstring

    store = CrawlStore.from_settings(settings)
    try:
        url, version, crawl_id, fetched_at, warc_file, offset, length = _stored_version(store, args)
    except _NothingStoredError as err:
        return fail(str(err), EXIT_USAGE)
    try:
        status_line, headers, body = read_stored(store.archive, warc_file, offset, length)
    except ArchiveReadError as err:
        return fail(str(err), EXIT_UNAVAILABLE)
    print(f"{url} version {version}, crawl {crawl_id}, fetched {fetched_at:%Y-%m-%d %H:%M:%S} UTC, "
          f"{warc_file} @ {offset}", file=sys.stderr)
    head = "".join(f"{key}: {value}\r\n" for key, value in headers)
    out = sys.stdout.buffer
    out.write(f"{status_line}\r\n{head}\r\n".encode("latin-1", "replace"))
    out.write(body)
    out.flush()
    return 0


def _stored_version(store: CrawlStore, args: argparse.Namespace) -> tuple[Any, ...]:
    """(url, version, crawl, fetched_at, warc_file, offset, length) of the version to show."""
    if not store.exists():
        raise _NothingStoredError(f"no lake at {store.location.shown_catalog}: nothing stored yet")
    try:
        url = canonicalize(args.url)
    except InvalidURLError as err:
        raise _NothingStoredError(f"bad URL: {err}") from None
    with store.read() as con:
        row = pages.stored_version(con, url, args.crawl_id, args.version)
    if row is None:
        which = f" version {args.version}" if args.version is not None else ""
        crawl = f" in crawl {args.crawl_id}" if args.crawl_id else ""
        raise _NothingStoredError(f"no stored page {url}{which}{crawl}")
    version, crawl_id, status, error, fetched_at, warc_file, offset, length = row
    if status is None:
        raise _NothingStoredError(f"{url} version {version} has no response: {error}")
    if warc_file is None:
        raise _NothingStoredError(f"{url} version {version} was not archived (fetched before the archive, "
                                  "or with CRAWL_ARCHIVE=false)")
    return url, version, crawl_id, fetched_at, warc_file, offset, length


def export(settings: Settings, args: argparse.Namespace) -> int:
    from crawl_platform.archive.export import ExportError, export_crawl  # noqa: PLC0415 - see the docstring
    from crawl_platform.archive.reader import ArchiveReadError  # noqa: PLC0415

    store = CrawlStore.from_settings(settings)
    if not store.exists():
        return fail(f"no lake at {store.location.shown_catalog}: no crawl {args.crawl!r}", EXIT_USAGE)
    tables = args.table or ["pages", "documents", "links"]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(f"export {args.crawl}", total=None)

        def advance(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"export {args.crawl}: {what}", completed=done, total=total)

        try:
            files = export_crawl(store, args.crawl, args.format, Path(args.to), tables, advance)
        except ExportError as err:
            return fail(str(err), EXIT_USAGE)
        except ArchiveReadError as err:
            return fail(str(err), EXIT_UNAVAILABLE)
    if not files:
        print(f"crawl {args.crawl}: no archived responses, nothing written to {args.to}")
    for file in files:
        print(f"{file.path}: {file.rows} {'records' if file.table == 'warc' else 'rows'}")
    return 0


def add_arguments(sub: Any) -> None:  # argparse._SubParsersAction of the one-line parser
    """Declare ``show`` and ``export`` on the command line's subparsers."""
    shown = sub.add_parser("show", help="print a page's stored response (from the archive, no fetch)")
    shown.add_argument("url", metavar="URL")
    shown.add_argument("--version", type=int, metavar="N", help="this version (default: the latest)")
    shown.add_argument("--crawl-id", help="the latest version this crawl fetched")
    exported = sub.add_parser("export", help="write a crawl's tables (Parquet, JSON lines) or archive (WARC) to files")
    exported.add_argument("crawl", metavar="CRAWL", help="the crawl id")
    exported.add_argument("--format", required=True, help="parquet, jsonl or warc")
    exported.add_argument("--to", required=True, metavar="DIR", help="folder to write into (created if missing)")
    exported.add_argument("--table", action="append", metavar="TABLE",
                          help="a table to export (repeatable; default pages, documents and links; "
                          "ignored for warc)")


COMMANDS = {"show": show, "export": export}
