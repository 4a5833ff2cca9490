"""The ``hosts`` table: what runs learned about each origin (robots.txt cache, politeness gap).

A batch reads its origins' rows once before fetching (:func:`load_hosts`) and writes what its
fetch shards learned back inside its landing transaction (:func:`save_hosts`); the rows are
:class:`HostRecord`, which the fetcher primes its pacer with
(:class:`crawl_platform.fetch.politeness.HostPacer`) and gives back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class HostRecord:
    """One ``hosts`` row: what runs share about an origin (``scheme://host[:port]``)."""

    origin: str
    robots_status: int | None = None  # None: network error, or never fetched (robots_fetched_at None)
    robots_body: str | None = None
    robots_fetched_at: datetime | None = None  # naive UTC
    delay_ms: int | None = None
    updated_at: datetime | None = None  # naive UTC; read only: when a batch last landed for the host
    render_needed: bool | None = None  # its pages needed JavaScript rendering (None: keep what is stored)


def load_hosts(con: Any, origins: Iterable[str]) -> dict[str, HostRecord]:
    """The stored rows of ``origins`` (one query); absent hosts are absent from the result."""
    wanted = sorted(set(origins))
    if not wanted:
        return {}
    rows = con.execute(
        """SELECT origin, robots_status, robots_body, robots_fetched_at, delay_ms, updated_at, render_needed
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
    import pyarrow as pa  # noqa: PLC0415 - the fetcher imports this module for HostRecord and never needs pyarrow

    table = pa.table({
        "origin": [r.origin for r in rows],
        "robots_status": pa.array([r.robots_status for r in rows], pa.int32()),
        "robots_body": pa.array([r.robots_body for r in rows], pa.string()),
        "robots_fetched_at": pa.array([r.robots_fetched_at for r in rows], pa.timestamp("us")),
        "delay_ms": pa.array([r.delay_ms for r in rows], pa.int32()),
        "render_needed": pa.array([r.render_needed for r in rows], pa.bool_()),
    })
    con.register("inc_hosts", table)
    # The lake has no upsert: the merged rows are computed, the old ones deleted, the merged ones
    # inserted, all in the caller's transaction.
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE merged_hosts AS
        SELECT i.origin,
               CASE WHEN i.robots_fetched_at IS NULL THEN h.robots_status ELSE i.robots_status END AS robots_status,
               CASE WHEN i.robots_fetched_at IS NULL THEN h.robots_body ELSE i.robots_body END AS robots_body,
               coalesce(i.robots_fetched_at, h.robots_fetched_at) AS robots_fetched_at,
               coalesce(i.delay_ms, h.delay_ms) AS delay_ms,
               $1::TIMESTAMP AS updated_at,
               coalesce(i.render_needed, h.render_needed) AS render_needed
        FROM (SELECT DISTINCT ON (origin) * FROM inc_hosts) i LEFT JOIN hosts h USING (origin)
        """,
        [now],
    )
    con.execute("DELETE FROM hosts WHERE origin IN (SELECT origin FROM temp.merged_hosts)")
    con.execute("""INSERT INTO hosts (origin, robots_status, robots_body, robots_fetched_at, delay_ms, updated_at,
                                      render_needed)
                   SELECT * FROM temp.merged_hosts""")
    con.execute("DROP TABLE temp.merged_hosts")
    con.unregister("inc_hosts")
    return len(rows)
