"""The URL state store: every write to the ``frontier`` table, each a transition :mod:`crawl_platform.states` allows.

It inserts admitted URLs as ``discovered``, marks the ones the broker acknowledged ``queued``, and
closes a landed batch's items in their outcomes; it moves a paused, resumed or cancelled
crawl's rows; it also lists the pending rows the publisher sends again. Each write is checked
against the transitions here and made by :mod:`crawl_platform.store.frontier`. Methods that take a
connection run inside the caller's transaction (admission's, which must admit links and close a
batch at once, or a control command's); :meth:`URLStateStore.mark_queued` opens its
own, after the publish. Neighbours: :mod:`.admission` decides which rows enter,
:mod:`.publisher` reports the broker's acks here, :mod:`.read_model` reads what this writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.states import (
    CLOSED_STATES,
    URLState,
    check_transition,
    sources_of,
)
from crawl_platform.store import crawls, frontier
from crawl_platform.store.database import CrawlStore


def utc_now() -> datetime:
    """Naive UTC: every timestamp in the store is UTC, whatever the machine's time zone."""
    return datetime.now(UTC).replace(tzinfo=None)


class URLStateStore:
    """The ``frontier`` table's rows: a URL's state in a crawl, changed only along allowed transitions."""

    def __init__(self, store: CrawlStore) -> None:
        self.store = store

    def insert_discovered(self, con: duckdb.DuckDBPyConnection,
                          candidates: Sequence[tuple[str, str, int, str]]) -> list[FrontierURL]:
        """Insert the ``candidates`` (crawl_id, url, depth, host) that are new to their crawl and
        within its caps as ``discovered``, shallowest first, in the caller's transaction; returns
        them, to publish."""
        check_transition(None, URLState.DISCOVERED)
        rows = frontier.insert_discovered(con, candidates, utc_now())
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def mark_queued(self, urls: list[FrontierURL], refresh_queued: bool = False) -> None:
        """In a transaction of its own: the broker acknowledged ``urls``, so ``discovered`` ones
        become ``queued``; with ``refresh_queued`` the ones already ``queued`` restart their clock
        too (a re-publish, see :meth:`.read_model.FrontierReadModel.orphaned_count`)."""
        if not urls:
            return
        sources = sources_of(URLState.QUEUED) if refresh_queued else (URLState.DISCOVERED,)
        for source in sources:
            check_transition(source, URLState.QUEUED)
        with self.store.write() as con:
            frontier.mark_queued(con, [(u.crawl_id, u.url) for u in urls], sources, utc_now())

    def close_batch(self, con: duckdb.DuckDBPyConnection, batch_id: str) -> None:
        """Close every item of a landed batch in its outcome (``skipped`` ones stay as they are), in
        the caller's transaction. Items that never reached the frontier table (a producer outside
        the platform) are recorded first, then every pending row of the batch is closed."""
        for state in CLOSED_STATES:
            check_transition(None, state)
        frontier.close_batch(con, batch_id, utc_now())

    def reopen_postponed(self, con: duckdb.DuckDBPyConnection, batch_id: str) -> list[FrontierURL]:
        """In the caller's transaction: the ``queued`` rows of the batch's ``postponed`` items become
        ``discovered`` again; returns them, to publish (a lost publish is sent again like any
        ``discovered`` row's)."""
        check_transition(URLState.QUEUED, URLState.DISCOVERED)
        rows = frontier.reopen_postponed(con, batch_id, utc_now())
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def hold_paused(self, con: duckdb.DuckDBPyConnection, crawl_ids: set[str]) -> set[str]:
        """In the caller's transaction: the crawls among ``crawl_ids`` that are paused, whose
        ``discovered`` rows (just admitted) become ``paused`` instead of being published."""
        if not crawl_ids:
            return set()
        paused = crawls.paused_among(con, crawl_ids)
        for crawl_id in sorted(paused):
            self.move_crawl(con, crawl_id, (URLState.DISCOVERED,), URLState.PAUSED)
        return paused

    def move_crawl(self, con: duckdb.DuckDBPyConnection, crawl_id: str, sources: tuple[URLState, ...],
                   target: URLState) -> int:
        """In the caller's transaction: every row of ``crawl_id`` in one of ``sources`` becomes
        ``target`` (a crawl paused, resumed or cancelled); returns how many rows changed."""
        for source in sources:
            check_transition(source, target)
        return frontier.move_crawl(con, crawl_id, sources, target, utc_now())

    def urls_of(self, crawl_id: str, states: tuple[URLState, ...]) -> list[FrontierURL]:
        """One crawl's URLs in one of ``states`` (what resume publishes)."""
        with self.store.read() as con:
            rows = frontier.urls_of(con, crawl_id, states)
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def urls_in(self, states: tuple[URLState, ...], updated_before: datetime | None = None) -> list[FrontierURL]:
        """The URLs (of every crawl) in one of ``states``, optionally only those unchanged since
        ``updated_before``: what the publisher sends again."""
        with self.store.read() as con:
            rows = frontier.urls_in(con, states, updated_before)
        return [FrontierURL(c, u, d) for c, u, d in rows]
