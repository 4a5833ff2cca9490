"""The ``crawl_schedules`` table: each recurring crawl family's schedule, and how far its passes are.

A family (the crawl id before any ``@``) has one row: its interval or cron expression, the period
revisits start from (:mod:`.revisits`) and whether it is active. The schedule rules (parsing,
when a pass is due) are :mod:`crawl_platform.frontier.schedules` and
:mod:`crawl_platform.pipeline.schedules`; every function here runs on the connection of the
caller's read or write.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from crawl_platform.states import PENDING_STATES
from crawl_platform.store.frontier import STATE_COUNTS_SQL, sql_list


def insert_schedule(con: duckdb.DuckDBPyConnection, family: str, every_seconds: int | None, cron: str | None,
                    period_seconds: int, now: datetime) -> None:
    """In the caller's write transaction: an active schedule for ``family``, unless it has one already."""
    con.execute(
        """INSERT INTO crawl_schedules (crawl_id, every_seconds, cron, period_seconds, active, updated_at)
           SELECT ?, ?, ?, ?, true, ? WHERE NOT EXISTS (SELECT 1 FROM crawl_schedules WHERE crawl_id = ?)""",
        [family, every_seconds, cron, period_seconds, now, family])


def schedule_of(con: duckdb.DuckDBPyConnection, family: str) -> tuple[int | None, str | None, int] | None:
    """``(every_seconds, cron, period_seconds)`` of the family's schedule; None without one."""
    return con.execute("SELECT every_seconds, cron, period_seconds FROM crawl_schedules WHERE crawl_id = ?",
                       [family]).fetchone()


def replace_schedule(con: duckdb.DuckDBPyConnection, family: str, every_seconds: int | None, cron: str | None,
                     period_seconds: int, active: bool, now: datetime) -> None:
    """In the caller's write transaction: the family's schedule row becomes this one."""
    con.execute("DELETE FROM crawl_schedules WHERE crawl_id = ?", [family])
    con.execute("INSERT INTO crawl_schedules VALUES (?, ?, ?, ?, ?, ?)",
                [family, every_seconds, cron, period_seconds, active, now])


def active_schedules(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int | None, str | None]]:
    """``(family, every_seconds, cron)`` of every active schedule."""
    return con.execute("SELECT crawl_id, every_seconds, cron FROM crawl_schedules WHERE active").fetchall()


def scheduled_progress(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """``(crawl_id, pending URLs, latest change)`` of every crawl of an actively scheduled family
    (the latest change: its frontier's latest update, else its registration). The frontier is
    counted by crawl and state before the join (``STATE_COUNTS_SQL``, as for a crawl's status):
    a handful of rows to join, not every URL."""
    return con.execute(
        f"""SELECT c.crawl_id, coalesce(sum(f.n) FILTER (WHERE f.state IN {sql_list(PENDING_STATES)}), 0),
                   coalesce(max(f.changed), c.registered_at)
            FROM crawls c
            LEFT JOIN ({STATE_COUNTS_SQL}) f USING (crawl_id)
            WHERE split_part(c.crawl_id, '@', 1) IN (SELECT crawl_id FROM crawl_schedules WHERE active)
            GROUP BY c.crawl_id, c.registered_at""").fetchall()
