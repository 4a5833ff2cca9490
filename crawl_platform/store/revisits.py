"""Adaptive revisits: per crawl family and URL, a revisit interval and the time it is next due.

StormCrawler's AdaptiveScheduler and Nutch's AdaptiveFetchSchedule: when a fetch finds new content
(a new ``pages`` version) the interval shrinks toward the minimum, ``interval = (1 - d) * interval
+ d * min``; when it finds none (a 304, or the same content hash) it grows, ``interval *= 1 + i``;
it stays between a minimum and a maximum. A URL fetched for the first time starts at its family's
schedule period (``crawl_schedules.period_seconds``), else at the default interval. Times count
from the *start* of the pass that fetched the URL (``crawls.submitted_at``), so a daily pass finds
yesterday's URLs due whatever minute of the pass fetched them. :func:`update_revisits` runs inside
the landing transaction (:mod:`crawl_platform.pipeline.landing`), set-based; :func:`pass_candidates` and
:func:`drop_not_due` are what admission (:mod:`crawl_platform.frontier.admission`) asks, so a pass
of a family (``<family>@<stamp>``) fetches its due URLs plus new links, not the whole site.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from crawl_platform.config import Settings
from crawl_platform.store.bind import bound_rows

if TYPE_CHECKING:  # a `crawl` CLI, which registers seeds, never imports pyarrow (store/bind.py)
    import pyarrow as pa


@dataclass(frozen=True)
class RevisitPolicy:
    """The adaptive schedule's parameters (seconds; rates as fractions)."""

    min_interval_s: float = 60.0
    max_interval_s: float = 30 * 86400.0
    inc_rate: float = 0.4
    dec_rate: float = 0.2
    default_interval_s: float = 86400.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RevisitPolicy:
        return cls(settings.revisit_min_interval, settings.revisit_max_interval, settings.revisit_inc_rate,
                   settings.revisit_dec_rate, settings.revisit_default_interval)


def update_revisits(con: duckdb.DuckDBPyConnection, checked: pa.Table, policy: RevisitPolicy) -> None:
    """Apply one landed batch: ``checked`` has (crawl_id, url, depth, changed) per URL the batch
    fetched (a 304 and an unchanged hash are ``changed = false``). A URL already checked by the same
    pass (a batch landed twice) keeps its row."""
    if not checked.num_rows:
        return
    lo, hi, inc, dec = policy.min_interval_s, policy.max_interval_s, policy.inc_rate, policy.dec_rate
    con.register("inc_checked", checked)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE revisit_rows AS
        WITH r AS (SELECT split_part(i.crawl_id, '@', 1) AS crawl_id, i.url, min(i.depth) AS depth,
                          bool_or(i.changed) AS changed, max(c.submitted_at) AS checked_at,
                          any_value(s.period_seconds) AS period
                   FROM inc_checked i JOIN crawls c USING (crawl_id)
                   LEFT JOIN crawl_schedules s ON s.crawl_id = split_part(i.crawl_id, '@', 1)
                   GROUP BY ALL)
        SELECT crawl_id, url, depth, interval_seconds, checked_at,
               checked_at + to_microseconds(CAST(interval_seconds * 1e6 AS BIGINT)) AS next_due_at, changes, known
        FROM (SELECT r.crawl_id, r.url, least(r.depth, coalesce(o.depth, r.depth)) AS depth, o.url IS NOT NULL AS known,
                     greatest({lo}, least({hi}, CASE
                         WHEN o.url IS NULL THEN coalesce(r.period, {policy.default_interval_s})
                         WHEN r.changed THEN (1 - {dec}) * o.interval_seconds + {dec} * {lo}
                         ELSE o.interval_seconds * (1 + {inc}) END))::DOUBLE AS interval_seconds,
                     r.checked_at,
                     (coalesce(o.changes, 0) + CASE WHEN r.changed AND o.url IS NOT NULL THEN 1 ELSE 0 END)::INTEGER
                         AS changes
              FROM r LEFT JOIN revisits o ON o.crawl_id = r.crawl_id AND o.url = r.url
              WHERE o.url IS NULL OR o.checked_at < r.checked_at)
        """)
    known = con.execute("SELECT count(*) FROM temp.revisit_rows WHERE known").fetchone()
    if known and known[0]:  # a first crawl's batches only insert: no delete files
        con.execute("""DELETE FROM revisits WHERE url IN (SELECT url FROM temp.revisit_rows WHERE known)
                       AND crawl_id || ' ' || url IN
                           (SELECT crawl_id || ' ' || url FROM temp.revisit_rows WHERE known)""")
    con.execute("INSERT INTO revisits SELECT * EXCLUDE (known) FROM temp.revisit_rows")
    con.execute("DROP TABLE temp.revisit_rows")
    con.unregister("inc_checked")


def is_pass(crawl_id: str) -> bool:
    """A later pass of a family (``<family>@<stamp>``). A family's first crawl needs no revisit
    filter: every URL its family checked is one it fetched itself, so already in its frontier."""
    return "@" in crawl_id


def pass_candidates(con: duckdb.DuckDBPyConnection, crawl_id: str, seeds: list[str],
                    at: datetime) -> list[tuple[str, str, int]]:
    """What a crawl registered at ``at`` starts with: its family's URLs due by then (at their
    depth) and the seeds the family has not checked or that are due. A first crawl: its seeds."""
    if not is_pass(crawl_id):
        return [(crawl_id, url, 0) for url in seeds]
    family = crawl_id.split("@", 1)[0]
    known = {url: (depth, due <= at) for url, depth, due in con.execute(
        "SELECT url, depth, next_due_at FROM revisits WHERE crawl_id = ?", [family]).fetchall()}
    due = [(crawl_id, url, depth) for url, (depth, is_due) in sorted(known.items()) if is_due]
    return due + [(crawl_id, url, 0) for url in seeds if url not in known]


def drop_not_due(con: duckdb.DuckDBPyConnection,
                 candidates: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """The candidates (crawl_id, url, depth) less the URLs their crawl's family checked and that are
    not due at the crawl's submission: a pass follows new links only."""
    passes = [c for c in candidates if is_pass(c[0])]
    if not passes:
        return candidates
    with bound_rows(con, "revisit_candidates", {"crawl_id": ("VARCHAR", [c[0] for c in passes]),
                                                "url": ("VARCHAR", [c[1] for c in passes])}):
        skip = set(con.execute(
            """SELECT k.crawl_id, k.url FROM revisit_candidates k JOIN crawls c USING (crawl_id)
               JOIN revisits r ON r.crawl_id = split_part(k.crawl_id, '@', 1) AND r.url = k.url
               WHERE r.next_due_at > c.submitted_at""").fetchall())
    return [c for c in candidates if (c[0], c[1]) not in skip]


DEFAULT_REVISITS = RevisitPolicy()
