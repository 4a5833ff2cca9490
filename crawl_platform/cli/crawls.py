"""The crawl commands of ``crawl-platform``: ``crawl``, ``schedule``, ``cancel``/``pause``/``resume`` and ``status``.

:mod:`crawl_platform.cli.main` calls :func:`add_arguments` to declare them and dispatches to
:data:`COMMANDS`; each function here runs one command and returns its exit code, failing a user's
mistake with one line (:mod:`crawl_platform.cli.exits`). They submit through
:mod:`crawl_platform.pipeline.submission` and :mod:`crawl_platform.pipeline.control`, register
at once where the lake is reachable, and read a crawl's progress from the lake alone
(:class:`~crawl_platform.frontier.read_model.FrontierReadModel`), so ``status`` and
``crawl --wait`` need no Kafka client. :func:`wait_for_crawl` is ``crawl --wait``'s loop, which the
tests use too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import RENDER_MODES, CrawlRequest
from crawl_platform.cli.exits import EXIT_UNAVAILABLE, EXIT_USAGE, fail
from crawl_platform.config import Settings
from crawl_platform.extract.rules import load_rules
from crawl_platform.frontier.admission import RegistrationConflictError
from crawl_platform.frontier.control import PAST_TENSE, TARGETS, ControlRefusedError
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import CrawlStatus, FrontierReadModel
from crawl_platform.frontier.schedules import UnknownCrawlError, parse_schedule, set_schedule
from crawl_platform.pipeline.control import ACTIONS, build_control, submit_control
from crawl_platform.pipeline.registration import register_now
from crawl_platform.pipeline.submission import (
    SCOPES,
    build_crawl_request,
    clamped_policies,
    registration_conflict,
    render_refusal,
    submit_crawl,
    user_crawl_id_problem,
)
from crawl_platform.states import CrawlState
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.urls import InvalidURLError


def add_arguments(sub: Any, settings: Settings) -> None:  # argparse._SubParsersAction of the one-line parser
    """Declare ``crawl`` (its defaults from ``settings``), ``schedule``, the control commands and ``status``."""
    crawl = sub.add_parser("crawl", help="submit a crawl to the seeds topic")
    crawl.add_argument("urls", nargs="+", metavar="URL", help="seed URLs (http/https)")
    crawl.add_argument("--crawl-id", help="id of the crawl (default: <host>-<time>-<random>)")
    crawl.add_argument("--max-pages", type=int, default=settings.default_max_pages,
                       help=f"most URLs the crawl admits ({settings.default_max_pages})")
    crawl.add_argument("--max-depth", type=int, default=settings.default_max_depth,
                       help=f"most link hops from a seed ({settings.default_max_depth})")
    crawl.add_argument("--scope", choices=SCOPES, default=settings.default_scope,
                       help=f"which links to follow ({settings.default_scope})")
    crawl.add_argument("--allow", action="append", default=[], metavar="REGEX",
                       help="follow only URLs matching one of these (repeatable)")
    crawl.add_argument("--deny", action="append", default=[], metavar="REGEX",
                       help="never follow URLs matching one of these (repeatable)")
    crawl.add_argument("--max-pages-per-host", type=int, default=0, help="most URLs admitted per host (0: no cap)")
    crawl.add_argument("--user-agent", default="", help="User-Agent of this crawl (default: CRAWL_USER_AGENT)")
    crawl.add_argument("--sitemaps", action="store_true",
                       help="also seed from the seed hosts' sitemaps (robots.txt Sitemap: lines, /sitemap.xml)")
    crawl.add_argument("--every", metavar="INTERVAL", help="crawl again every INTERVAL, e.g. 6h, 1d, 1h30m")
    crawl.add_argument("--cron", metavar="CRON", help='crawl again on a 5-field cron schedule (UTC), e.g. "0 * * * *"')
    crawl.add_argument("--host-delay-ms", type=int, default=0, metavar="MS",
                       help="this crawl's gap between two requests to a host (0: CRAWL_HOST_DELAY_MS; "
                       "at least CRAWL_MIN_HOST_DELAY_MS)")
    crawl.add_argument("--host-concurrency", type=int, default=0, metavar="N",
                       help="this crawl's requests in flight per host (0: CRAWL_HOST_CONCURRENCY; "
                       "at most CRAWL_MAX_REQUESTS_PER_HOST)")
    crawl.add_argument("--priority", type=int, default=0,
                       help="higher runs this crawl's batches first when the run queue is full (0; "
                       "at most CRAWL_MAX_PRIORITY)")
    crawl.add_argument("--extract", type=Path, metavar="RULES",
                       help="extraction rules (YAML or JSON) whose records land in `records`")
    crawl.add_argument("--render", choices=RENDER_MODES, default="never",
                       help="run pages' JavaScript in a headless browser: never, always, or auto (pages that "
                       "need it, and their hosts from then on); needs Chromium")
    crawl.add_argument("--screenshots", action="store_true",
                       help="with --render: archive a screenshot of each rendered page")
    crawl.add_argument("--wait", action="store_true", help="block until the crawl has no pending URLs")
    crawl.add_argument("--timeout", type=float, default=0, help="with --wait: give up after N seconds (0: never)")

    schedule = sub.add_parser("schedule", help="crawl a crawl again on a schedule, or stop it")
    schedule.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl (any of its passes)")
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", metavar="INTERVAL", help="every INTERVAL, e.g. 6h, 1d, 1h30m")
    when.add_argument("--cron", metavar="CRON", help='on a 5-field cron schedule (UTC), e.g. "0 * * * *"')
    when.add_argument("--off", action="store_true", help="no more recurring passes")

    for action, text in (("cancel", "cancel a crawl: its unfetched URLs are dropped, no new one admitted"),
                         ("pause", "pause a crawl: its URLs are kept and none is fetched"),
                         ("resume", "resume a paused crawl: its URLs are published again")):
        control = sub.add_parser(action, help=text)
        control.add_argument("crawl_id", metavar="CRAWL_ID", help="the crawl")

    status = sub.add_parser("status", help="state, pending, fetched, failed and pages/s per crawl")
    status.add_argument("--crawl-id", help="only this crawl")


def _control_command(settings: Settings, args: argparse.Namespace) -> int:
    return _control(settings, args.command, args.crawl_id)


def _crawl_request(args: argparse.Namespace) -> CrawlRequest:
    """The request ``crawl`` submits; raises ValueError with the one line to print."""
    if args.crawl_id is not None and (problem := user_crawl_id_problem(args.crawl_id)) is not None:
        raise ValueError(problem)
    try:
        return build_crawl_request(
            args.urls, args.crawl_id, args.max_pages, args.max_depth, args.scope, allow=args.allow,
            deny=args.deny, max_pages_per_host=args.max_pages_per_host, user_agent=args.user_agent,
            use_sitemaps=args.sitemaps, every=args.every, cron=args.cron, host_delay_ms=args.host_delay_ms,
            host_concurrency=args.host_concurrency, priority=args.priority,
            extract=load_rules(args.extract) if args.extract else None, render=args.render,
            screenshots=args.screenshots,
        )
    except InvalidURLError as exc:  # nothing is enqueued when any seed is bad
        raise ValueError(f"bad seed: {exc}") from None


def _crawl(settings: Settings, args: argparse.Namespace) -> int:
    try:
        request = _crawl_request(args)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    refusal = render_refusal(request, settings)
    if refusal is not None:  # nothing is submitted that no batch could render
        return fail(refusal, EXIT_USAGE)
    bus = KafkaBus.from_settings(settings)
    store = CrawlStore.from_settings(settings, threads=1)  # small questions: see from_settings
    conflict = registration_conflict(store, bus, request)
    if conflict is not None:  # the seeds sensor would refuse it: nothing is submitted
        return fail(conflict, EXIT_USAGE)
    submit_crawl(bus, request)
    print(f"submitted crawl {request.crawl_id} ({len(request.seeds)} seeds)")
    for note in clamped_policies(request, settings):
        print(f"note: {note} (the platform's limit)")
    # The first batch need not wait for the seeds sensor and an intake run (seconds).
    try:
        not_now = register_now(store, bus, request)
    except RegistrationConflictError as exc:  # registered by another submission meanwhile
        return fail(str(exc), EXIT_USAGE)
    if not_now is not None:
        print(f"the seeds sensor registers it ({not_now})")
    if not args.wait:
        return 0
    return wait_for_crawl(FrontierReadModel(store), request.crawl_id, args.timeout)


def _schedule(settings: Settings, args: argparse.Namespace) -> int:
    try:
        schedule = None if args.off else parse_schedule(args.every, args.cron)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    store = CrawlStore.from_settings(settings)
    if not store.exists():
        return fail(f"no crawl {args.crawl_id!r} (no lake at {store.location.shown_catalog})", EXIT_USAGE)
    try:
        family = set_schedule(store, args.crawl_id, schedule)
    except UnknownCrawlError as exc:
        return fail(str(exc), EXIT_USAGE)
    print(f"crawl {family}: " + (f"recurring, {schedule.describe()}" if schedule else "no recurring passes"))
    return 0


def _control(settings: Settings, action: str, crawl_id: str) -> int:
    """Cancel, pause or resume: checked against the lake, put on the control topic, then applied
    here where the lake is reachable (the control run of the message then finds it applied)."""
    try:
        command = build_control(crawl_id, action)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    store = CrawlStore.from_settings(settings)
    try:
        states = FrontierReadModel(store).crawl_states({command.crawl_id}) if store.exists() else {}
    except (StoreUnavailableError, StoreBusyError) as exc:
        submit_control(KafkaBus.from_settings(settings), command)
        print(f"submitted {action} of crawl {command.crawl_id}; the control sensor applies it "
              f"({' '.join(str(exc).split())})")
        return 0
    if command.crawl_id not in states:
        return fail(f"no crawl {command.crawl_id!r}", EXIT_USAGE)
    state, target = states[command.crawl_id], TARGETS[command.action]
    if state is not target and not state.can_become(target):
        return fail(f"crawl {command.crawl_id} is {state}: it cannot be {PAST_TENSE[command.action]}", EXIT_USAGE)
    bus = KafkaBus.from_settings(settings)
    submit_control(bus, command)
    try:
        outcome = Frontier(store, bus).control(command)
    except ControlRefusedError as exc:  # its state changed in between
        return fail(str(exc), EXIT_USAGE)
    print(outcome.describe())
    return 0


QUICK_POLL_PENDING = 1000
"""With this many URLs pending or fewer, ``crawl --wait`` looks for a commit to the lake every
:data:`QUICK_POLL_S` and reads the crawl's status as soon as one came, so it reports the end of a
crawl within a fifth of a second rather than up to a second late (a small site's last link level
lands seconds after its first). On the embedded catalog a look is two ``stat`` calls
(:meth:`~crawl_platform.store.location.LakeLocation.catalog_files_state`); on a shared one, a
snapshot query. A status read costs several times that, and more on a big lake: with more
pending, it is read once a ``poll_s``."""
QUICK_POLL_S = 0.2


def wait_for_crawl(read_model: FrontierReadModel, crawl_id: str, timeout_s: float = 0, poll_s: float = 1.0) -> int:
    """Print progress until the crawl has no pending URL; 0 when done, 1 on timeout. Reads the
    store only, so it waits without a Kafka client."""
    started = time.monotonic()
    last_line = ""
    while True:
        seen = _lake_state(read_model.store)  # before the status: a commit after it is seen
        found = read_model.status(crawl_id)
        if found and found[0].pending == 0 and found[0].state != CrawlState.PAUSED:
            print(_line(found[0]), flush=True)
            return 0
        line = _line(found[0]) if found else f"crawl {crawl_id}: waiting for the seeds sensor to register it"
        if line != last_line:
            print(line, flush=True)
            last_line = line
        if timeout_s and time.monotonic() - started > timeout_s:
            print(f"crawl {crawl_id}: still pending after {timeout_s:.0f}s", file=sys.stderr)
            return EXIT_UNAVAILABLE
        if found and found[0].pending <= QUICK_POLL_PENDING:
            _sleep_until_a_commit(read_model.store, seen, poll_s)
        else:
            time.sleep(poll_s)


def _lake_state(store: CrawlStore) -> object:
    files = store.location.catalog_files_state()
    return files if files is not None else store.snapshot_id()


def _sleep_until_a_commit(store: CrawlStore, seen: object, poll_s: float) -> None:
    """Sleep until the lake's state is no longer ``seen`` (a commit came), or for ``poll_s`` at most."""
    deadline = time.monotonic() + poll_s
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(QUICK_POLL_S, left))
        if _lake_state(store) != seen:
            return


def _line(s: CrawlStatus) -> str:
    state = ("done" if s.pending == 0 else "running") if s.state == CrawlState.ACTIVE else s.state
    return (f"crawl {s.crawl_id}: {state}, pending {s.pending}, fetched {s.fetched}, failed {s.failed}, "
            f"disallowed {s.disallowed}, {s.pages_per_second:.1f} pages/s")


def _status(settings: Settings, args: argparse.Namespace) -> int:
    crawl_id: str | None = args.crawl_id
    store = CrawlStore.from_settings(settings, threads=1)
    if not store.exists():
        print(f"no crawls yet (no lake at {store.location.shown_catalog})")
        return 0
    rows = FrontierReadModel(store).status(crawl_id)  # the store alone: no Kafka client
    if not rows:
        print(f"no crawl {crawl_id!r}" if crawl_id else "no crawls yet")
        return EXIT_USAGE if crawl_id else 0
    table = Table("crawl", "pending", "fetched", "failed", "disallowed", "pages/s", "registered", "state",
                  "paused", "cancelled", "priority")
    for s in rows:
        table.add_row(s.crawl_id, str(s.pending), str(s.fetched), str(s.failed), str(s.disallowed),
                      f"{s.pages_per_second:.1f}", s.registered_at.strftime("%Y-%m-%d %H:%M:%S"), s.shown_state,
                      str(s.paused), str(s.cancelled), str(s.priority))
    Console(width=140).print(table)
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "crawl": _crawl, "schedule": _schedule, **dict.fromkeys(ACTIONS, _control_command), "status": _status,
}
