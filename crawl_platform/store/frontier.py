"""The ``frontier`` table: each URL's row in each crawl, and the reads that admission and status make around it.

A row moves only along the transitions of :mod:`crawl_platform.states`; the frontier's domain
objects (:mod:`crawl_platform.frontier.state_store`) check each move before calling the function
here that makes it. Every function runs on the connection of the caller's read or write
(:meth:`CrawlStore.read`, :meth:`CrawlStore.write`), so admitting a batch's links and closing
its items is one transaction. State values enter the SQL as literals (:func:`sql_literal`,
:func:`sql_list`): they are our own identifiers, never input. The admission query
(``_ADMITTED_SQL``) enforces each crawl's caps and keeps the shallowest URLs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

import duckdb

from crawl_platform.states import (
    CLOSED_STATES,
    NOT_CLOSING,
    PENDING_STATES,
    BatchOutcome,
    CrawlState,
    URLState,
    sources_of,
)
from crawl_platform.store.bind import bound_rows


def sql_literal(value: StrEnum) -> str:
    """A state or outcome as a SQL string literal (the values are our own identifiers, never input)."""
    return f"'{value.value}'"


def sql_list(values: Iterable[StrEnum]) -> str:
    """States or outcomes as a SQL ``IN`` list: ``('discovered', 'queued')``."""
    return f"({', '.join(sql_literal(v) for v in values)})"


_ACTIVE, _CANCELLED = sql_literal(CrawlState.ACTIVE), sql_literal(CrawlState.CANCELLED)

# Within each crawl's page caps, new (crawl, url) pairs of the relation ``candidates``,
# shallowest first per crawl and per host. The frontier is read twice: the anti-join, and one
# count of the candidates' crawls by host, whose sums are the crawls' counts too.
_ADMITTED_SQL = f"""
    WITH used AS MATERIALIZED (SELECT crawl_id, host, count(*) AS used FROM frontier
                               WHERE crawl_id IN (SELECT crawl_id FROM candidates)
                               GROUP BY crawl_id, host)
    SELECT crawl_id, url, depth, host
    FROM (SELECT capped.*,
                 row_number() OVER (PARTITION BY crawl_id ORDER BY depth, url) AS rn
          FROM (SELECT n.*, r.room
                FROM (SELECT c.*,
                             row_number() OVER (PARTITION BY c.crawl_id, c.host ORDER BY c.depth, c.url)
                                 AS host_rn
                      FROM (SELECT crawl_id, url, min(depth) AS depth, any_value(host) AS host
                            FROM candidates GROUP BY crawl_id, url) c
                      ANTI JOIN frontier f ON f.crawl_id = c.crawl_id AND f.url = c.url) n
                JOIN (SELECT cr.crawl_id, cr.max_pages - coalesce(sum(u.used), 0) AS room,
                             coalesce(cr.max_pages_per_host, 0) AS per_host
                      FROM crawls cr LEFT JOIN used u USING (crawl_id)
                      WHERE cr.crawl_id IN (SELECT crawl_id FROM candidates)
                        AND coalesce(cr.state, {_ACTIVE}) <> {_CANCELLED}
                      GROUP BY cr.crawl_id, cr.max_pages, cr.max_pages_per_host) r USING (crawl_id)
                LEFT JOIN used h ON h.crawl_id = n.crawl_id AND h.host = n.host
                WHERE r.per_host = 0 OR n.host_rn + coalesce(h.used, 0) <= r.per_host) capped)
    WHERE rn <= room
"""

Key = tuple[str, str, int]
"""A frontier URL as rows carry it: ``(crawl_id, url, depth)``."""


# --- writes, each in the caller's write transaction ----------------------------------------------
def insert_discovered(con: duckdb.DuckDBPyConnection, candidates: Sequence[tuple[str, str, int, str]],
                      now: datetime) -> list[Key]:
    """Insert as ``discovered`` the ``candidates`` (crawl_id, url, depth, host) that are new to their
    crawl and that its caps leave room for, shallowest first (``_ADMITTED_SQL``); returns them."""
    with bound_rows(con, "candidates", {"crawl_id": ("VARCHAR", [c[0] for c in candidates]),
                                        "url": ("VARCHAR", [c[1] for c in candidates]),
                                        "depth": ("INTEGER", [c[2] for c in candidates]),
                                        "host": ("VARCHAR", [c[3] for c in candidates])}):
        # The lake supports no RETURNING: the admitted rows are fixed in a temporary table first.
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE admitted AS SELECT crawl_id, url, depth, host FROM ({_ADMITTED_SQL})")
        con.execute(
            f"""
            INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at)
            SELECT url, crawl_id, depth, {sql_literal(URLState.DISCOVERED)}, $1, host, $1 FROM temp.admitted
            """,
            [now],
        )
        rows = con.execute("SELECT crawl_id, url, depth FROM temp.admitted").fetchall()
        con.execute("DROP TABLE temp.admitted")
    return rows


def mark_queued(con: duckdb.DuckDBPyConnection, keys: Sequence[tuple[str, str]], sources: Sequence[URLState],
                now: datetime) -> None:
    """The rows of ``keys`` (crawl_id, url) in one of ``sources`` become ``queued``."""
    confirmed = {"crawl_id": ("VARCHAR", [k[0] for k in keys]), "url": ("VARCHAR", [k[1] for k in keys])}
    with bound_rows(con, "confirmed", confirmed):
        con.execute(
            f"""UPDATE frontier SET state = {sql_literal(URLState.QUEUED)}, updated_at = $1 FROM confirmed c
               WHERE frontier.crawl_id = c.crawl_id AND frontier.url = c.url
                 AND frontier.state IN {sql_list(sources)}""",
            [now],
        )


def close_batch(con: duckdb.DuckDBPyConnection, batch_id: str, now: datetime) -> None:
    """Every item of a landed batch closes its row in its outcome (``skipped`` and ``postponed``
    ones leave theirs alone); items without a row (a producer outside the platform) get one."""
    open_ = sql_list(NOT_CLOSING)
    con.execute(
        f"""INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at, batch_id)
           SELECT b.url, b.crawl_id, b.depth, b.outcome, $2, split_part(b.url, '/', 3), $2, $1
           FROM batch_items b JOIN crawls USING (crawl_id)
           WHERE b.batch_id = $1 AND b.outcome NOT IN {open_}
             AND NOT EXISTS (SELECT 1 FROM frontier f WHERE f.crawl_id = b.crawl_id AND f.url = b.url)""",
        [batch_id, now],
    )
    con.execute(
        f"""UPDATE frontier SET state = b.outcome, batch_id = b.batch_id, updated_at = $2
           FROM batch_items b
           WHERE b.batch_id = $1 AND b.outcome NOT IN {open_} AND frontier.crawl_id = b.crawl_id
             AND frontier.url = b.url AND frontier.state IN {sql_list(sources_of(*CLOSED_STATES))}""",
        [batch_id, now],
    )


def reopen_postponed(con: duckdb.DuckDBPyConnection, batch_id: str, now: datetime) -> list[Key]:
    """The ``queued`` rows of the batch's ``postponed`` items become ``discovered``; returns them."""
    postponed, queued = sql_literal(BatchOutcome.POSTPONED), sql_literal(URLState.QUEUED)
    rows: list[Key] = con.execute(
        f"""SELECT f.crawl_id, f.url, f.depth FROM frontier f JOIN batch_items b USING (crawl_id, url)
           WHERE b.batch_id = $1 AND b.outcome = {postponed} AND f.state = {queued}""",
        [batch_id]).fetchall()
    if rows:
        con.execute(
            f"""UPDATE frontier SET state = {sql_literal(URLState.DISCOVERED)}, updated_at = $2
               FROM batch_items b
               WHERE b.batch_id = $1 AND b.outcome = {postponed} AND frontier.crawl_id = b.crawl_id
                 AND frontier.url = b.url AND frontier.state = {queued}""",
            [batch_id, now])
    return rows


def move_crawl(con: duckdb.DuckDBPyConnection, crawl_id: str, sources: Sequence[URLState], target: URLState,
               now: datetime) -> int:
    """Every row of ``crawl_id`` in one of ``sources`` becomes ``target``; how many changed."""
    where = f"crawl_id = $1 AND state IN {sql_list(sources)}"
    count = int(con.execute(f"SELECT count(*) FROM frontier WHERE {where}", [crawl_id]).fetchone()[0])  # type: ignore[index]
    if count:
        con.execute(f"UPDATE frontier SET state = {sql_literal(target)}, updated_at = $2 WHERE {where}",
                    [crawl_id, now])
    return count


# --- reads ------------------------------------------------------------------------------------------
def urls_of(con: duckdb.DuckDBPyConnection, crawl_id: str, states: Sequence[URLState]) -> list[Key]:
    """One crawl's URLs in one of ``states``."""
    return con.execute(f"SELECT crawl_id, url, depth FROM frontier WHERE crawl_id = ? AND state IN "
                       f"{sql_list(states)}", [crawl_id]).fetchall()


def urls_in(con: duckdb.DuckDBPyConnection, states: Sequence[URLState],
            updated_before: datetime | None = None) -> list[Key]:
    """The URLs (of every crawl) in one of ``states``, optionally only those unchanged since ``updated_before``."""
    sql = f"SELECT crawl_id, url, depth FROM frontier WHERE state IN {sql_list(states)}"
    params: list[object] = []
    if updated_before is not None:
        sql += " AND updated_at < ?"
        params.append(updated_before)
    return con.execute(sql, params or []).fetchall()


def rows_of(con: duckdb.DuckDBPyConnection, keys: Sequence[tuple[str, str]]) -> list[tuple[str, str, str, int]]:
    """``(crawl_id, url, state, depth)`` of the rows of ``keys`` (crawl_id, url) that exist."""
    columns = {"crawl_id": ("VARCHAR", [k[0] for k in keys]), "url": ("VARCHAR", [k[1] for k in keys])}
    with bound_rows(con, "items", columns):
        return con.execute(
            """SELECT DISTINCT f.crawl_id, f.url, f.state, f.depth FROM frontier f
               JOIN items i USING (crawl_id, url)"""
        ).fetchall()


def queued_before(con: duckdb.DuckDBPyConnection, before: datetime) -> int:
    """How many rows are ``queued`` and unchanged since ``before``."""
    return int(con.execute(
        f"SELECT count(*) FROM frontier WHERE state = {sql_literal(URLState.QUEUED)} AND updated_at < ?",
        [before],
    ).fetchone()[0])  # type: ignore[index]


def queued_hosts(con: duckdb.DuckDBPyConnection) -> int:
    """How many hosts have URLs ``queued``."""
    return int(con.execute(
        f"SELECT count(DISTINCT host) FROM frontier WHERE state = {sql_literal(URLState.QUEUED)}").fetchone()[0])  # type: ignore[index]


# Each crawl's frontier rows counted by state, with their latest update: a handful of rows,
# which status and the recurring schedules join to their crawls.
STATE_COUNTS_SQL = ("SELECT crawl_id, state, count(*) AS n, max(updated_at) AS changed FROM frontier "
                    "GROUP BY crawl_id, state")
_CRAWLS_SQL = f"""
    SELECT crawl_id, registered_at, coalesce(state, {sql_literal(CrawlState.ACTIVE)}), coalesce(priority, 0)
    FROM crawls WHERE $1 IS NULL OR crawl_id = $1 ORDER BY registered_at
"""


def progress(con: duckdb.DuckDBPyConnection, crawl_id: str | None = None) -> list[tuple[Any, ...]]:
    """Per crawl in registration order (or only ``crawl_id``): its id, URLs pending, fetched,
    failed and disallowed, registration time, its latest closed row's update, its state, URLs
    paused and cancelled, and its priority.

    The frontier is read once, counted by crawl and state (a handful of rows), and the crawls are
    joined in Python: ``crawl --wait`` reads this every second through a whole crawl, and a scan
    that groups by two short columns costs a fraction of one that joins every row to its crawl
    first. Every crawl's rows are counted, one crawl's included: a filter on ``crawl_id`` costs
    more per row than the grouping."""
    counts: dict[str, dict[str, int]] = {}
    closed_at: dict[str, Any] = {}
    for crawl, state, count, changed in con.execute(STATE_COUNTS_SQL).fetchall():
        counts.setdefault(crawl, {})[state] = count
        if state not in PENDING_STATES and (crawl not in closed_at or changed > closed_at[crawl]):
            closed_at[crawl] = changed
    rows = []
    for crawl, registered_at, state, priority in con.execute(_CRAWLS_SQL, [crawl_id]).fetchall():
        of = counts.get(crawl, {})
        rows.append((crawl, sum(of.get(s, 0) for s in PENDING_STATES), of.get(URLState.FETCHED, 0),
                     of.get(URLState.FAILED, 0), of.get(URLState.DISALLOWED, 0), registered_at,
                     closed_at.get(crawl), state, of.get(URLState.PAUSED, 0), of.get(URLState.CANCELLED, 0),
                     priority))
    return rows


_PRIORITISED = f"c.priority > 0 AND coalesce(c.state, {_ACTIVE}) = {_ACTIVE}"


def any_prioritised(con: duckdb.DuckDBPyConnection) -> bool:
    """True when an active crawl has a priority above 0."""
    return bool(con.execute(f"SELECT count(*) FROM crawls c WHERE {_PRIORITISED}").fetchone()[0])  # type: ignore[index]


def queued_host_priorities(con: duckdb.DuckDBPyConnection, max_priority: int) -> list[tuple[str, int]]:
    """``(host, priority)``: the highest priority (at most ``max_priority``) of an active crawl
    with URLs ``queued`` on each host that has any."""
    return con.execute(
        f"""SELECT f.host, least(max(c.priority), ?) FROM frontier f JOIN crawls c USING (crawl_id)
            WHERE {_PRIORITISED} AND f.state = {sql_literal(URLState.QUEUED)}
            GROUP BY f.host""", [max_priority]).fetchall()


def link_targets(con: duckdb.DuckDBPyConnection, batch_id: str, outcomes: Collection[BatchOutcome]) -> list[Key]:
    """The links of a landed batch to admit: each distinct (crawl, link target) of its items in
    one of ``outcomes`` (of the page versions the batch landed, or a page's latest where it landed
    none: the page was unchanged), at the shallowest item's depth plus one, within the crawl's
    ``max_depth``."""
    # The version of each page to follow, and the batch that landed it: the version this batch
    # landed, or for a page it landed none of (it came back unchanged) its latest, which an older
    # batch landed. Both ``pages`` and ``links`` are then read by ``batch_id``, which DuckLake
    # prunes by file, so the reads do not grow with the tables: ``pages`` whole only for the URLs
    # this batch landed no version of (a recrawl's unchanged pages), and ``links`` where batch_id
    # IS NULL only for rows landed before links had the column, which costs nothing on a lake
    # without such rows.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE link_sources AS
        SELECT b.crawl_id, b.url, b.depth, p.v, CASE WHEN p.v IS NOT NULL THEN $1 END AS landed_in
        FROM batch_items b
        JOIN crawls c USING (crawl_id)
        LEFT JOIN (SELECT url, max(version) AS v FROM pages WHERE batch_id = $1 GROUP BY url) p ON p.url = b.url
        WHERE b.batch_id = $1 AND b.outcome IN {sql_list(outcomes)} AND b.depth + 1 <= c.max_depth
        """,
        [batch_id],
    )
    try:
        if con.execute("SELECT count(*) FROM temp.link_sources WHERE v IS NULL").fetchone()[0]:  # type: ignore[index]
            con.execute(
                """
                UPDATE temp.link_sources s SET v = l.v, landed_in = l.landed_in
                FROM (SELECT url, max(version) AS v, arg_max(batch_id, version) AS landed_in FROM pages
                      WHERE url IN (SELECT url FROM temp.link_sources WHERE v IS NULL) GROUP BY url) l
                WHERE s.v IS NULL AND s.url = l.url
                """
            )
        landed_in = [row[0] for row in con.execute(
            "SELECT DISTINCT landed_in FROM temp.link_sources WHERE landed_in IS NOT NULL").fetchall()]
        by_batch = (f"SELECT src_url, src_version, dst_url FROM links WHERE batch_id IN "
                    f"({', '.join('?' * len(landed_in))}) UNION ALL " if landed_in else "")
        # Each distinct (crawl, link target) once, at its shallowest: a batch's pages link the
        # same targets over and over (a site's navigation).
        return con.execute(
            f"""
            SELECT s.crawl_id, k.dst_url, min(s.depth) + 1
            FROM temp.link_sources s
            JOIN ({by_batch}SELECT src_url, src_version, dst_url FROM links WHERE batch_id IS NULL) k
              ON k.src_url = s.url AND k.src_version = s.v
            GROUP BY s.crawl_id, k.dst_url
            """,
            landed_in,
        ).fetchall()
    finally:
        con.execute("DROP TABLE temp.link_sources")
