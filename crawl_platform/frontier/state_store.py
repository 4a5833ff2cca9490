"""The URL state store: every write to the ``frontier`` table, each a transition :mod:`crawl_platform.states` allows.

It inserts admitted URLs as ``discovered``, marks the ones the broker acknowledged ``queued``, and
closes a landed batch's items in their outcomes; it moves a paused, resumed or cancelled
crawl's rows; it also lists the pending rows the publisher sends again. Methods that take a
connection run inside the caller's transaction (admission's, which must admit links and close a
batch at once, or a control command's); :meth:`URLStateStore.mark_queued` opens its
own, after the publish. Neighbours: :mod:`.admission` decides which rows enter,
:mod:`.publisher` reports the broker's acks here, :mod:`.read_model` reads what this writes.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.states import (
    CLOSED_STATES,
    NOT_CLOSING,
    BatchOutcome,
    CrawlState,
    URLState,
    check_transition,
    sources_of,
    sql_list,
    sql_literal,
)
from crawl_platform.store.bind import bound_rows
from crawl_platform.store.database import CrawlStore


def utc_now() -> datetime:
    """Naive UTC: every timestamp in the store is UTC, whatever the machine's time zone."""
    return datetime.now(UTC).replace(tzinfo=None)


class URLStateStore:
    """The ``frontier`` table's rows: a URL's state in a crawl, changed only along allowed transitions."""

    def __init__(self, store: CrawlStore) -> None:
        self.store = store

    def insert_discovered(self, con: duckdb.DuckDBPyConnection, admitted_sql: str) -> list[FrontierURL]:
        """Insert the rows that ``admitted_sql`` selects (columns ``crawl_id, url, depth, host``, all
        new to their crawl) as ``discovered``, in the caller's transaction; returns them, to publish."""
        check_transition(None, URLState.DISCOVERED)
        # The lake supports no RETURNING: the admitted rows are fixed in a temporary table first.
        con.execute(f"CREATE OR REPLACE TEMP TABLE admitted AS SELECT crawl_id, url, depth, host FROM ({admitted_sql})")
        con.execute(
            f"""
            INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at)
            SELECT url, crawl_id, depth, {sql_literal(URLState.DISCOVERED)}, $1, host, $1 FROM temp.admitted
            """,
            [utc_now()],
        )
        rows = con.execute("SELECT crawl_id, url, depth FROM temp.admitted").fetchall()
        con.execute("DROP TABLE temp.admitted")
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
        confirmed = {"crawl_id": ("VARCHAR", [u.crawl_id for u in urls]), "url": ("VARCHAR", [u.url for u in urls])}
        with self.store.write() as con, bound_rows(con, "confirmed", confirmed):
            con.execute(
                f"""UPDATE frontier SET state = {sql_literal(URLState.QUEUED)}, updated_at = $1 FROM confirmed c
                   WHERE frontier.crawl_id = c.crawl_id AND frontier.url = c.url
                     AND frontier.state IN {sql_list(sources)}""",
                [utc_now()],
            )

    def close_batch(self, con: duckdb.DuckDBPyConnection, batch_id: str) -> None:
        """Close every item of a landed batch in its outcome (``skipped`` ones stay as they are), in
        the caller's transaction. Items that never reached the frontier table (a producer outside
        the platform) are recorded first, then every pending row of the batch is closed."""
        for state in CLOSED_STATES:
            check_transition(None, state)
        open_ = sql_list(NOT_CLOSING)
        con.execute(
            f"""INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at, batch_id)
               SELECT b.url, b.crawl_id, b.depth, b.outcome, $2, split_part(b.url, '/', 3), $2, $1
               FROM batch_items b JOIN crawls USING (crawl_id)
               WHERE b.batch_id = $1 AND b.outcome NOT IN {open_}
                 AND NOT EXISTS (SELECT 1 FROM frontier f WHERE f.crawl_id = b.crawl_id AND f.url = b.url)""",
            [batch_id, utc_now()],
        )
        con.execute(
            f"""UPDATE frontier SET state = b.outcome, batch_id = b.batch_id, updated_at = $2
               FROM batch_items b
               WHERE b.batch_id = $1 AND b.outcome NOT IN {open_} AND frontier.crawl_id = b.crawl_id
                 AND frontier.url = b.url AND frontier.state IN {sql_list(sources_of(*CLOSED_STATES))}""",
            [batch_id, utc_now()],
        )

    def reopen_postponed(self, con: duckdb.DuckDBPyConnection, batch_id: str) -> list[FrontierURL]:
        """In the caller's transaction: the ``queued`` rows of the batch's ``postponed`` items become
        ``discovered`` again; returns them, to publish (a lost publish is sent again like any
        ``discovered`` row's)."""
        check_transition(URLState.QUEUED, URLState.DISCOVERED)
        postponed, queued = sql_literal(BatchOutcome.POSTPONED), sql_literal(URLState.QUEUED)
        rows = con.execute(
            f"""SELECT f.crawl_id, f.url, f.depth FROM frontier f JOIN batch_items b USING (crawl_id, url)
               WHERE b.batch_id = $1 AND b.outcome = {postponed} AND f.state = {queued}""",
            [batch_id]).fetchall()
        if rows:
            con.execute(
                f"""UPDATE frontier SET state = {sql_literal(URLState.DISCOVERED)}, updated_at = $2
                   FROM batch_items b
                   WHERE b.batch_id = $1 AND b.outcome = {postponed} AND frontier.crawl_id = b.crawl_id
                     AND frontier.url = b.url AND frontier.state = {queued}""",
                [batch_id, utc_now()])
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def hold_paused(self, con: duckdb.DuckDBPyConnection, crawl_ids: set[str]) -> set[str]:
        """In the caller's transaction: the crawls among ``crawl_ids`` that are paused, whose
        ``discovered`` rows (just admitted) become ``paused`` instead of being published."""
        if not crawl_ids:
            return set()
        paused_state = sql_literal(CrawlState.PAUSED)
        paused = {r[0] for r in con.execute(
            f"SELECT crawl_id FROM crawls WHERE list_contains(?, crawl_id) AND state = {paused_state}",
            [sorted(crawl_ids)]).fetchall()}
        for crawl_id in sorted(paused):
            self.move_crawl(con, crawl_id, (URLState.DISCOVERED,), URLState.PAUSED)
        return paused

    def move_crawl(self, con: duckdb.DuckDBPyConnection, crawl_id: str, sources: tuple[URLState, ...],
                   target: URLState) -> int:
        """In the caller's transaction: every row of ``crawl_id`` in one of ``sources`` becomes
        ``target`` (a crawl paused, resumed or cancelled); returns how many rows changed."""
        for source in sources:
            check_transition(source, target)
        where = f"crawl_id = $1 AND state IN {sql_list(sources)}"
        count = int(con.execute(f"SELECT count(*) FROM frontier WHERE {where}", [crawl_id]).fetchone()[0])  # type: ignore[index]
        if count:
            con.execute(f"UPDATE frontier SET state = {sql_literal(target)}, updated_at = $2 WHERE {where}",
                        [crawl_id, utc_now()])
        return count

    def urls_of(self, crawl_id: str, states: tuple[URLState, ...]) -> list[FrontierURL]:
        """One crawl's URLs in one of ``states`` (what resume publishes)."""
        rows = self.store.query(f"SELECT crawl_id, url, depth FROM frontier WHERE crawl_id = ? AND state IN "
                                f"{sql_list(states)}", [crawl_id])
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def urls_in(self, states: tuple[URLState, ...], updated_before: datetime | None = None) -> list[FrontierURL]:
        """The URLs (of every crawl) in one of ``states``, optionally only those unchanged since
        ``updated_before``: what the publisher sends again."""
        sql = f"SELECT crawl_id, url, depth FROM frontier WHERE state IN {sql_list(states)}"
        params: list[object] = []
        if updated_before is not None:
            sql += " AND updated_at < ?"
            params.append(updated_before)
        rows = self.store.query(sql, params or None)
        return [FrontierURL(c, u, d) for c, u, d in rows]
