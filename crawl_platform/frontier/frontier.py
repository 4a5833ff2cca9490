"""The crawl frontier: which URLs each crawl knows, their state, and publishing them to Kafka.

DuckDB's ``frontier`` table is the record; the Kafka frontier topic only carries work. A URL is
inserted as ``discovered``, becomes ``queued`` once the broker acknowledged it, and ends as
``fetched``, ``failed`` or ``disallowed`` when its batch is expanded. Anything left
``discovered`` (the broker lost or refused it) is published again on a later pass, so a broker
that forgets everything costs time, never URLs. Neighbours: :mod:`crawl_platform.store.landing` writes
what :meth:`Frontier.expand` reads; :mod:`crawl_platform.bus.kafka` carries what it publishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.store.database import CrawlStore
from crawl_platform.urls import CrawlScope, canonicalize, host_of

PENDING_STATES = ("discovered", "queued")
STALE_DISCOVERED_S = 30


@dataclass(frozen=True)
class FrontierGrowth:
    """What one pass added: URLs admitted to the frontier, and how many the broker confirmed."""

    discovered: int
    admitted: int
    published: int
    unconfirmed: int


@dataclass(frozen=True)
class CrawlStatus:
    crawl_id: str
    pending: int
    fetched: int
    failed: int
    disallowed: int
    registered_at: datetime
    last_update: datetime | None

    @property
    def pages_per_second(self) -> float:
        done = self.fetched + self.failed
        if not done or self.last_update is None:
            return 0.0
        seconds = (self.last_update - self.registered_at).total_seconds()
        return done / seconds if seconds > 0 else 0.0


def _now() -> datetime:
    """Naive UTC: every timestamp in the store is UTC, whatever the machine's time zone."""
    return datetime.now(UTC).replace(tzinfo=None)


class Frontier:
    """Admits URLs into crawls and keeps the Kafka frontier topic in step with the store."""

    def __init__(self, store: CrawlStore, bus: Bus) -> None:
        self.store = store
        self.bus = bus

    def register(self, request: CrawlRequest) -> FrontierGrowth:
        """Record a crawl and admit its (valid) seeds at depth 0; idempotent per crawl id."""
        seeds = sorted({canonicalize(s) for s in request.seeds})
        with self.store.write() as con:
            con.execute(
                """INSERT INTO crawls (crawl_id, seeds, scope, max_pages, max_depth, submitted_at,
                                       registered_at, allow_patterns, deny_patterns, max_pages_per_host,
                                       user_agent, use_sitemaps)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING""",
                [request.crawl_id, seeds, request.scope, request.max_pages, request.max_depth,
                 datetime.fromtimestamp(request.submitted_at, UTC).replace(tzinfo=None), _now(),
                 list(request.allow_patterns), list(request.deny_patterns), request.max_pages_per_host,
                 request.user_agent, request.use_sitemaps],
            )
            admitted = self._admit(con, [(request.crawl_id, url, 0) for url in seeds])
        return self._publish(admitted, len(seeds))

    def expand(self, batch_id: str) -> FrontierGrowth:
        """Admit the in-scope links of a landed batch and close its items, in one transaction."""
        with self.store.write() as con:
            rows = con.execute(
                """
                SELECT b.crawl_id, b.depth + 1, k.dst_url, c.scope, c.seeds, c.allow_patterns, c.deny_patterns
                FROM batch_items b
                JOIN crawls c USING (crawl_id)
                JOIN (SELECT url, max(version) AS v FROM pages
                      WHERE url IN (SELECT url FROM batch_items WHERE batch_id = $1) GROUP BY url) p
                  ON p.url = b.url
                JOIN links k ON k.src_url = b.url AND k.src_version = p.v
                WHERE b.batch_id = $1 AND b.outcome IN ('fetched', 'failed') AND b.depth + 1 <= c.max_depth
                """,
                [batch_id],
            ).fetchall()
            scopes: dict[str, CrawlScope] = {}
            candidates: list[tuple[str, str, int]] = []
            for crawl_id, depth, url, scope, seeds, allow, deny in rows:
                crawl_scope = scopes.get(crawl_id)
                if crawl_scope is None:
                    crawl_scope = scopes[crawl_id] = CrawlScope.from_row(scope, seeds, allow, deny)
                if crawl_scope.admits(url):
                    candidates.append((crawl_id, url, depth))
            admitted = self._admit(con, candidates)
            # Items that never reached the frontier table (a producer outside the platform) are
            # recorded first, then every item of the batch is closed.
            con.execute(
                """INSERT INTO frontier
                   SELECT b.url, b.crawl_id, b.depth, b.outcome, $2, split_part(b.url, '/', 3), $2, $1
                   FROM batch_items b JOIN crawls USING (crawl_id)
                   WHERE b.batch_id = $1 AND b.outcome <> 'skipped'
                   ON CONFLICT DO NOTHING""",
                [batch_id, _now()],
            )
            con.execute(
                """UPDATE frontier SET state = b.outcome, batch_id = b.batch_id, updated_at = $2
                   FROM batch_items b
                   WHERE b.batch_id = $1 AND b.outcome <> 'skipped' AND frontier.crawl_id = b.crawl_id
                     AND frontier.url = b.url AND frontier.state IN ('discovered', 'queued')""",
                [batch_id, _now()],
            )
        return self._publish(admitted, len(candidates))

    def admit(self, crawl_id: str, urls: list[str], depth: int) -> FrontierGrowth:
        """Admit already scope-checked URLs of a crawl at ``depth`` (e.g. from its sitemaps) and
        publish the new ones; the crawl's page caps apply."""
        candidates = [(crawl_id, url, depth) for url in urls]
        with self.store.write() as con:
            admitted = self._admit(con, candidates)
        return self._publish(admitted, len(candidates))

    def republish_stale(self, older_than_s: float = STALE_DISCOVERED_S) -> FrontierGrowth:
        """Publish again every URL still ``discovered`` after ``older_than_s`` (lost by the broker)."""
        rows = self.store.query(
            "SELECT crawl_id, url, depth FROM frontier WHERE state = 'discovered' AND updated_at < ?",
            [_now() - timedelta(seconds=older_than_s)],
        )
        return self._publish([FrontierURL(c, u, d) for c, u, d in rows], len(rows))

    def requeue_all_pending(self) -> FrontierGrowth:
        """After the broker lost its data: publish every URL that is known but not fetched."""
        rows = self.store.query(
            "SELECT crawl_id, url, depth FROM frontier WHERE state IN ('discovered', 'queued')"
        )
        return self._publish([FrontierURL(c, u, d) for c, u, d in rows], len(rows), refresh_queued=True)

    def orphaned_count(self, older_than_s: float) -> int:
        """URLs ``queued`` for more than ``older_than_s``: when no batch run is in flight and the
        topic has no unplanned messages, nothing will ever fetch them (their run failed for good,
        or their message was lost), so they must be published again."""
        return int(self.store.query(
            "SELECT count(*) FROM frontier WHERE state = 'queued' AND updated_at < ?",
            [_now() - timedelta(seconds=older_than_s)],
        )[0][0])

    def done_urls(self, items: list[FrontierURL]) -> set[tuple[str, str]]:
        """The (crawl_id, url) pairs among ``items`` that the crawl already finished."""
        if not items:
            return set()
        table = pa.table({"crawl_id": [i.crawl_id for i in items], "url": [i.url for i in items]})
        with self.store.read() as con:
            con.register("items", table)
            rows = con.execute(
                """SELECT f.crawl_id, f.url FROM frontier f JOIN items i USING (crawl_id, url)
                   WHERE f.state NOT IN ('discovered', 'queued')"""
            ).fetchall()
        return {(c, u) for c, u in rows}

    def batch_landed(self, batch_id: str) -> bool:
        """True once the batch's landing transaction committed (its items are recorded)."""
        return bool(self.store.query("SELECT count(*) FROM batch_items WHERE batch_id = ?", [batch_id])[0][0])

    def known_crawls(self, crawl_ids: set[str]) -> set[str]:
        if not crawl_ids:
            return set()
        rows = self.store.query("SELECT crawl_id FROM crawls WHERE list_contains(?, crawl_id)",
                                [sorted(crawl_ids)])
        return {r[0] for r in rows}

    def status(self, crawl_id: str | None = None) -> list[CrawlStatus]:
        rows = self.store.query(
            """
            SELECT c.crawl_id,
                   count(f.url) FILTER (WHERE f.state IN ('discovered', 'queued')),
                   count(f.url) FILTER (WHERE f.state = 'fetched'),
                   count(f.url) FILTER (WHERE f.state = 'failed'),
                   count(f.url) FILTER (WHERE f.state = 'disallowed'),
                   c.registered_at,
                   max(f.updated_at) FILTER (WHERE f.state NOT IN ('discovered', 'queued'))
            FROM crawls c LEFT JOIN frontier f USING (crawl_id)
            WHERE $1 IS NULL OR c.crawl_id = $1
            GROUP BY c.crawl_id, c.registered_at ORDER BY c.registered_at
            """,
            [crawl_id],
        )
        return [CrawlStatus(*row) for row in rows]

    # --- internals -----------------------------------------------------------------------------
    def _admit(self, con: Any, candidates: list[tuple[str, str, int]]) -> list[FrontierURL]:
        """Insert new (crawl, url) pairs as ``discovered``, within each crawl's max_pages and
        max_pages_per_host; shallower URLs first, so a cap cuts the deepest ones."""
        if not candidates:
            return []
        table = pa.table({
            "crawl_id": [c[0] for c in candidates],
            "url": [c[1] for c in candidates],
            "depth": pa.array([c[2] for c in candidates], pa.int32()),
            "host": [host_of(c[1]) for c in candidates],
        })
        con.register("candidates", table)
        rows = con.execute(
            """
            INSERT INTO frontier (url, crawl_id, depth, state, discovered_at, host, updated_at)
            SELECT url, crawl_id, depth, 'discovered', $1, host, $1
            FROM (SELECT capped.*,
                         row_number() OVER (PARTITION BY crawl_id ORDER BY depth, url) AS rn
                  FROM (SELECT n.*, r.room
                        FROM (SELECT c.*,
                                     row_number() OVER (PARTITION BY c.crawl_id, c.host ORDER BY c.depth, c.url)
                                         AS host_rn
                              FROM (SELECT crawl_id, url, min(depth) AS depth, any_value(host) AS host
                                    FROM candidates GROUP BY crawl_id, url) c
                              ANTI JOIN frontier f ON f.crawl_id = c.crawl_id AND f.url = c.url) n
                        JOIN (SELECT cr.crawl_id, cr.max_pages - count(f.url) AS room,
                                     coalesce(cr.max_pages_per_host, 0) AS per_host
                              FROM crawls cr LEFT JOIN frontier f USING (crawl_id)
                              WHERE cr.crawl_id IN (SELECT crawl_id FROM candidates)
                              GROUP BY cr.crawl_id, cr.max_pages, cr.max_pages_per_host) r USING (crawl_id)
                        LEFT JOIN (SELECT crawl_id, host, count(*) AS used FROM frontier
                                   WHERE crawl_id IN (SELECT crawl_id FROM candidates)
                                   GROUP BY crawl_id, host) h ON h.crawl_id = n.crawl_id AND h.host = n.host
                        WHERE r.per_host = 0 OR n.host_rn + coalesce(h.used, 0) <= r.per_host) capped)
            WHERE rn <= room
            RETURNING crawl_id, url, depth
            """,
            [_now()],
        ).fetchall()
        con.unregister("candidates")
        return [FrontierURL(c, u, d) for c, u, d in rows]

    def _publish(self, urls: list[FrontierURL], discovered: int, refresh_queued: bool = False) -> FrontierGrowth:
        if not urls:
            return FrontierGrowth(discovered, 0, 0, 0)
        delivered = publish_frontier(self.bus, urls)
        confirmed = [u for u, ok in zip(urls, delivered, strict=True) if ok]
        if confirmed:
            table = pa.table({"crawl_id": [u.crawl_id for u in confirmed], "url": [u.url for u in confirmed]})
            with self.store.write() as con:
                con.register("confirmed", table)
                # A re-publish also restarts the clock of URLs already queued (see orphaned_count).
                states = "('discovered', 'queued')" if refresh_queued else "('discovered')"
                con.execute(
                    f"""UPDATE frontier SET state = 'queued', updated_at = $1 FROM confirmed c
                       WHERE frontier.crawl_id = c.crawl_id AND frontier.url = c.url
                         AND frontier.state IN {states}""",
                    [_now()],
                )
        return FrontierGrowth(discovered, len(urls), len(confirmed), len(urls) - len(confirmed))

