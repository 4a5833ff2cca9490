"""``crawl-platform extract CRAWL_ID [--rules FILE]``: (re-)extract a crawl's records from the archive.

With ``--rules`` the crawl's extraction rules are replaced first (checked as ``crawl --extract``
checks them: a bad file is one line and exit 2, and the stored rules stay). Then every page
version not yet extracted with the crawl's rules (after a change: all of them) is read from the raw
archive, never refetched, and its records land in ``records`` (:mod:`crawl_platform.extract.run`),
with a progress bar on a terminal. The summary names the typed view to query, the rules' digest,
and how many field notes of each kind the records carry. :func:`add_arguments` declares the arguments
and :mod:`crawl_platform.cli.main` dispatches to :func:`run`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from crawl_platform.config import Settings
from crawl_platform.extract.rules import UnknownCrawlError, load_rules
from crawl_platform.store.database import CrawlStore

if TYPE_CHECKING:  # the extraction engine (pyarrow, lxml, fastwarc) loads only when `extract` runs
    from crawl_platform.extract.run import ExtractReport


def add_arguments(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]  # argparse's own type
    extract = sub.add_parser("extract", help="(re-)extract a crawl's records from the archive, no refetch")
    extract.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl")
    extract.add_argument("--rules", type=Path, metavar="FILE",
                         help="replace the crawl's extraction rules with this YAML or JSON file first")


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Raises ``RulesError`` or ``UnknownCrawlError``, which the command line prints as one line, exit 2."""
    rules = load_rules(args.rules) if args.rules is not None else None
    store = CrawlStore.from_settings(settings)
    if not store.exists():
        raise UnknownCrawlError(f"no crawl {args.crawl_id!r} (no lake at {store.location.shown_catalog})")
    from crawl_platform.extract.records import set_rules  # noqa: PLC0415 - see TYPE_CHECKING above

    if rules is not None:
        set_rules(store, args.crawl_id, rules)
    report = _extract(store, args.crawl_id)
    for line in summary(report):
        print(line)
    return 0


def _extract(store: CrawlStore, crawl_id: str) -> ExtractReport:
    from crawl_platform.extract.run import extract_crawl  # noqa: PLC0415

    console = Console(stderr=True)
    if not console.is_terminal:
        return extract_crawl(store, crawl_id)
    columns = (TextColumn("extracting"), BarColumn(), MofNCompleteColumn(), TextColumn("pages"),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("extract", total=None)
        return extract_crawl(store, crawl_id, progress=lambda done, total: bar.update(task, completed=done,
                                                                                       total=total))


def summary(report: ExtractReport) -> list[str]:
    """What ``extract`` prints: counts, where the records are, the notes by field and kind."""
    from crawl_platform.extract.records import view_name  # noqa: PLC0415

    lines = [f"crawl {report.crawl_id}: {report.pages} pages extracted, {report.records} records, "
             f"{report.page_errors} pages with an error (rules {report.rules_digest})"]
    if report.replaced_pages:
        lines.append(f"replaced the records of {report.replaced_pages} pages made by earlier rules")
    lines.append(f"typed records: SELECT * FROM {view_name(report.crawl_id)}")
    lines += [f"  {key}: {count} records" for key, count in sorted(report.field_errors.items())]
    lines += [f"  page error: {example}" for example in report.examples]
    if report.unbounded:
        lines.append(f"note: {report.unbounded}")
    return lines

