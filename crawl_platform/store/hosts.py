"""The ``hosts`` table: what runs learned about each origin (robots.txt cache, politeness gap).

A batch reads its origins' rows once before fetching (:func:`load_hosts`) and writes what its
fetch shards learned back inside its landing transaction (:func:`save_hosts`); the records are
:class:`crawl_platform.fetch.politeness.HostRecord`, which the fetcher primes its pacer with.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa

from crawl_platform.fetch.politeness import HostRecord


def load_hosts(con: Any, origins: Iterable[str]) -> dict[str, HostRecord]:
    """The stored rows of ``origins`` (one query); absent hosts are absent from the result."""
    wanted = sorted(set(origins))
    if not wanted:
        return {}
    rows = con.execute(
        """SELECT origin, robots_status, robots_body, robots_fetched_at, delay_ms, updated_at
           FROM hosts WHERE list_contains(?, origin)""",
        [wanted],
    ).fetchall()
    return {r[0]: HostRecord(*r) for r in rows}


def save_hosts(con: Any, records: Iterable[HostRecord], now: datetime) -> int:
    """Upsert ``records`` (inside the caller's transaction); returns how many were written.

    A record with ``robots_fetched_at`` None keeps the stored robots.txt, and one with
    ``delay_ms`` None keeps the stored gap: each run writes back only what it learned.
    """
    rows = list(records)
    if not rows:
        return 0
    table = pa.table({
        "origin": [r.origin for r in rows],
        "robots_status": pa.array([r.robots_status for r in rows], pa.int32()),
        "robots_body": pa.array([r.robots_body for r in rows], pa.string()),
        "robots_fetched_at": pa.array([r.robots_fetched_at for r in rows], pa.timestamp("us")),
        "delay_ms": pa.array([r.delay_ms for r in rows], pa.int32()),
    })
    con.register("inc_hosts", table)
    con.execute(
        """
        INSERT INTO hosts (origin, robots_status, robots_body, robots_fetched_at, delay_ms, updated_at)
        SELECT origin, robots_status, robots_body, robots_fetched_at, delay_ms, $1 FROM inc_hosts
        ON CONFLICT (origin) DO UPDATE SET
            robots_status = CASE WHEN excluded.robots_fetched_at IS NULL THEN hosts.robots_status
                                 ELSE excluded.robots_status END,
            robots_body = CASE WHEN excluded.robots_fetched_at IS NULL THEN hosts.robots_body
                               ELSE excluded.robots_body END,
            robots_fetched_at = coalesce(excluded.robots_fetched_at, hosts.robots_fetched_at),
            delay_ms = coalesce(excluded.delay_ms, hosts.delay_ms),
            updated_at = excluded.updated_at
        """,
        [now],
    )
    con.unregister("inc_hosts")
    return len(rows)
