"""Crawl control: cancel, pause and resume a whole crawl, applied to the store (and the bus on resume).

A :class:`~crawl_platform.bus.messages.CrawlControl` command moves the crawl's ``crawls.state``
along :data:`~crawl_platform.states.CRAWL_TRANSITIONS` and its frontier rows with it, in one write transaction:
pause keeps every pending row as ``paused``; cancel ends every unfinished row ``cancelled``;
resume makes the paused rows ``discovered`` again and, after the commit, publishes them (the
broker's acks make them ``queued``; unconfirmed ones are published again like any stale
``discovered`` row). Batches that meet a paused or cancelled crawl's messages fetch none of them
(:class:`crawl_platform.pipeline.reader.BatchReader`), and admission admits nothing new into a
cancelled crawl (:mod:`.admission`). Applying is idempotent: a command for the state the crawl is
already in changes nothing, and one issued before the crawl's last applied command is stale and
ignored, so the control topic's messages may be applied again, late or twice (the CLI applies
directly, then the control run applies the same message). Neighbours: :mod:`.state_store` moves
the rows, :mod:`.publisher` puts resumed URLs on the bus,
:mod:`crawl_platform.pipeline.control` reads commands from the control topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb

from crawl_platform.bus.messages import MAX_CLOCK_SKEW_S, ControlAction, CrawlControl
from crawl_platform.frontier.publisher import FrontierPublisher
from crawl_platform.frontier.state_store import URLStateStore
from crawl_platform.states import PENDING_STATES, CrawlState, URLState
from crawl_platform.store import crawls
from crawl_platform.store.database import CrawlStore

TARGETS: dict[ControlAction, CrawlState] = {
    "cancel": CrawlState.CANCELLED,
    "pause": CrawlState.PAUSED,
    "resume": CrawlState.ACTIVE,
}
PAST_TENSE: dict[ControlAction, str] = {"cancel": "cancelled", "pause": "paused", "resume": "resumed"}


class UnknownCrawlError(ValueError):
    """The command names a crawl that was never registered; ``str(err)`` is one line."""


class ControlRefusedError(ValueError):
    """The crawl's state does not allow the command (a cancelled crawl cannot be resumed)."""


@dataclass(frozen=True)
class ControlOutcome:
    """What applying one command did: the crawl's state before and after, whether anything changed
    (not when it was already in that state or the command was stale), the frontier rows moved,
    and on resume how many URLs were published again."""

    crawl_id: str
    action: ControlAction
    before: CrawlState
    after: CrawlState
    changed: bool
    urls: int = 0
    published: int = 0
    stale: bool = False

    def describe(self) -> str:
        """One line for the user."""
        if self.stale:
            return f"crawl {self.crawl_id}: an older {self.action} command, ignored (the crawl is {self.after})"
        if not self.changed and self.action != "resume":
            return f"crawl {self.crawl_id} is already {self.after}"
        if self.action == "cancel":
            return f"crawl {self.crawl_id} cancelled: {self.urls} unfetched URLs dropped"
        if self.action == "pause":
            return f"crawl {self.crawl_id} paused: {self.urls} pending URLs kept, none fetched until resume"
        already = "" if self.changed else " (it was not paused)"
        return f"crawl {self.crawl_id} resumed{already}: {self.published} URLs published again"


class CrawlController:
    """Applies control commands to crawls; each :meth:`apply` is one store transaction (plus the
    publish of a resume)."""

    def __init__(self, store: CrawlStore, states: URLStateStore, publisher: FrontierPublisher) -> None:
        self.store = store
        self.states = states
        self.publisher = publisher

    def apply(self, command: CrawlControl) -> ControlOutcome:
        """Apply ``command``; raises :class:`UnknownCrawlError` or :class:`ControlRefusedError`.
        Idempotent (see the module docstring)."""
        target = TARGETS[command.action]
        issued = datetime.fromtimestamp(command.issued_at, UTC).replace(tzinfo=None)
        with self.store.write() as con:
            row = crawls.state_of(con, command.crawl_id)
            if row is None:
                raise UnknownCrawlError(f"no crawl {command.crawl_id!r}")
            before = CrawlState(row[0] or CrawlState.ACTIVE)
            last = row[1]
            if last is not None and last > datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=MAX_CLOCK_SKEW_S):
                # A stored command dated ahead of the clock (the lake does not check the times it
                # holds) orders nothing: every later command would look older and be ignored.
                last = None
            if last is not None and issued < last:
                return ControlOutcome(command.crawl_id, command.action, before, before, False, stale=True)
            if before is target:
                moved = 0
                if last is None or issued > last:
                    # A repeat changes nothing but is the latest command: an older one arriving late
                    # must not undo it (resume, then a late pause from before the resume).
                    crawls.set_state(con, command.crawl_id, target, issued)
            elif not before.can_become(target):
                raise ControlRefusedError(
                    f"crawl {command.crawl_id} is {before}: it cannot be {PAST_TENSE[command.action]}")
            else:
                crawls.set_state(con, command.crawl_id, target, issued)
                moved = self._move_rows(con, command.crawl_id, target)
        outcome = ControlOutcome(command.crawl_id, command.action, before, target, before is not target, moved)
        if target is CrawlState.ACTIVE:
            # Also on a repeated resume: URLs whose publish the broker did not confirm last time
            # are still ``discovered`` and go out again (a duplicate delivery is skipped by batches).
            urls = self.states.urls_of(command.crawl_id, (URLState.DISCOVERED,))
            growth = self.publisher.publish(urls, len(urls))
            outcome = ControlOutcome(outcome.crawl_id, outcome.action, before, target, outcome.changed,
                                     moved, growth.published)
        return outcome

    def _move_rows(self, con: duckdb.DuckDBPyConnection, crawl_id: str, target: CrawlState) -> int:
        if target is CrawlState.PAUSED:
            return self.states.move_crawl(con, crawl_id, PENDING_STATES, URLState.PAUSED)
        if target is CrawlState.CANCELLED:
            return self.states.move_crawl(con, crawl_id, (*PENDING_STATES, URLState.PAUSED),
                                          URLState.CANCELLED)
        return self.states.move_crawl(con, crawl_id, (URLState.PAUSED,), URLState.DISCOVERED)
