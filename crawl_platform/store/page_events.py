"""The ``page_event_batches`` table, and the ``pages`` rows that page events carry.

``pages`` is the outbox of the page events (:mod:`crawl_platform.pipeline.page_events`): a
landed batch's versions are read back (:func:`batch_versions`), published, and the batch is
recorded here once the broker confirmed them all (:func:`record_published`); a batch that
landed versions and is not recorded is found again by :func:`unrecorded_batches`. Every function
runs on the connection of the caller's read or write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import duckdb


def unrecorded_batches(con: duckdb.DuckDBPyConnection, since: datetime, before: datetime) -> list[str]:
    """The batches that landed versions fetched since ``since``, none of them since ``before``,
    and that are not recorded as published; the oldest first."""
    rows = con.execute(
        """SELECT batch_id FROM pages WHERE fetched_at >= ? GROUP BY batch_id HAVING max(fetched_at) < ?
           AND batch_id NOT IN (SELECT batch_id FROM page_event_batches) ORDER BY min(fetched_at)""",
        [since, before],
    ).fetchall()
    return [row[0] for row in rows]


def record_published(con: duckdb.DuckDBPyConnection, batch_ids: Sequence[str], events: Sequence[int],
                     now: datetime) -> None:
    """In the caller's write transaction: the batches (with how many events each) are published."""
    # Recorded once: a batch confirmed again (a retry, a sweep racing a retry) is not doubled.
    con.execute(
        """INSERT INTO page_event_batches (batch_id, events, published_at)
           SELECT b.batch_id, b.events, ? FROM (SELECT unnest(?) AS batch_id, unnest(?) AS events) b
           WHERE b.batch_id NOT IN (SELECT batch_id FROM page_event_batches)""",
        [now, list(batch_ids), list(events)],
    )


def batch_versions(con: duckdb.DuckDBPyConnection, batch_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """The page versions the batches landed: ``(url, crawl_id, version, status, content_hash,
    fetched_at, batch_id, error, warc_file, warc_offset, warc_length)``, by batch, URL and version."""
    return con.execute(
        """SELECT url, crawl_id, version, status, content_hash, fetched_at, batch_id, error,
                  warc_file, warc_offset, warc_length
           FROM pages WHERE list_contains(?, batch_id) ORDER BY batch_id, url, version""",
        [list(batch_ids)],
    ).fetchall()
