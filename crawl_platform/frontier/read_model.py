"""The frontier's read model: progress per crawl, and the questions a batch or sensor asks before acting.

Read-only and bus-free: it needs only a :class:`~crawl_platform.store.database.CrawlStore`, so
``crawl-platform status`` and ``crawl --wait`` build no Kafka client. It answers how far each
crawl is (:class:`CrawlStatus`), which delivered URLs are already done (duplicate deliveries),
whether a batch landed, which crawls exist and in which state (active, paused, cancelled), which
frontier partitions hold a prioritised crawl's URLs, and how many URLs sit ``queued`` with nothing
left to fetch them. Neighbours: :mod:`.state_store` and :mod:`.admission` write what this reads, the CLI
and the Kafka sensors read through it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.frontier.state_store import utc_now
from crawl_platform.states import PENDING_STATES, CrawlState, URLState, sql_list, sql_literal
from crawl_platform.store.bind import bound_rows
from crawl_platform.store.database import CrawlStore


@dataclass(frozen=True)
class FrontierRow:
    """What the ``frontier`` table says of one URL of one crawl."""

    state: URLState
    depth: int  # the depth the crawl admitted it at


@dataclass(frozen=True)
class CrawlStatus:
    crawl_id: str
    pending: int
    fetched: int
    failed: int
    disallowed: int
    registered_at: datetime
    last_update: datetime | None
    state: str = "active"  # the stored crawl state (CrawlState), see `shown_state`
    paused: int = 0  # URLs kept while the crawl is paused
    cancelled: int = 0  # URLs dropped when the crawl was cancelled
    priority: int = 0

    @property
    def shown_state(self) -> str:
        """What ``status`` shows: the crawl's state, or ``finished`` for an active crawl with
        nothing left to fetch."""
        if self.state == CrawlState.ACTIVE and self.pending == 0 and self.paused == 0:
            return "finished"
        return self.state

    @property
    def pages_per_second(self) -> float:
        done = self.fetched + self.failed
        if not done or self.last_update is None:
            return 0.0
        seconds = (self.last_update - self.registered_at).total_seconds()
        return done / seconds if seconds > 0 else 0.0


_PENDING = sql_list(PENDING_STATES)
_ACTIVE = sql_literal(CrawlState.ACTIVE)

_STATUS_SQL = f"""
    SELECT c.crawl_id,
           count(f.url) FILTER (WHERE f.state IN {_PENDING}),
           count(f.url) FILTER (WHERE f.state = {sql_literal(URLState.FETCHED)}),
           count(f.url) FILTER (WHERE f.state = {sql_literal(URLState.FAILED)}),
           count(f.url) FILTER (WHERE f.state = {sql_literal(URLState.DISALLOWED)}),
           c.registered_at,
           max(f.updated_at) FILTER (WHERE f.state NOT IN {_PENDING}),
           coalesce(c.state, {sql_literal(CrawlState.ACTIVE)}),
           count(f.url) FILTER (WHERE f.state = {sql_literal(URLState.PAUSED)}),
           count(f.url) FILTER (WHERE f.state = {sql_literal(URLState.CANCELLED)}),
           coalesce(c.priority, 0)
    FROM crawls c LEFT JOIN frontier f USING (crawl_id)
    WHERE $1 IS NULL OR c.crawl_id = $1
    GROUP BY c.crawl_id, c.registered_at, c.state, c.priority ORDER BY c.registered_at
"""


class FrontierReadModel:
    """Read-only questions about crawls and their frontier, answered from the store alone."""

    def __init__(self, store: CrawlStore) -> None:
        self.store = store

    def status(self, crawl_id: str | None = None) -> list[CrawlStatus]:
        """Every crawl in registration order (or only ``crawl_id``; empty when it is unknown)."""
        return [CrawlStatus(*row) for row in self.store.query(_STATUS_SQL, [crawl_id])]

    def orphaned_count(self, older_than_s: float) -> int:
        """URLs ``queued`` for more than ``older_than_s``: when no batch run is in flight and the
        topic has no unplanned messages, nothing will ever fetch them (their run failed for good,
        or their message was lost), so they must be published again."""
        return int(self.store.query(
            f"SELECT count(*) FROM frontier WHERE state = {sql_literal(URLState.QUEUED)} AND updated_at < ?",
            [utc_now() - timedelta(seconds=older_than_s)],
        )[0][0])

    def queued_hosts(self) -> int:
        """Hosts with URLs ``queued`` (published, not yet fetched): how many the next batches
        spread over, which sizes them (:meth:`Settings.partition_batch_size`)."""
        return int(self.store.query(
            f"SELECT count(DISTINCT host) FROM frontier WHERE state = {sql_literal(URLState.QUEUED)}")[0][0])

    def landed_ends(self, epoch: int, partitions: Collection[int] | None = None) -> dict[int, int]:
        """Frontier partition -> the end of the last offset range a batch of ``epoch`` landed there
        (``partitions``: only those), from ``batch_ranges``; what a continuing batch run and the
        frontier sensor go on from (:mod:`crawl_platform.pipeline.continuation`)."""
        sql = 'SELECT "partition", max(end_offset) FROM batch_ranges WHERE epoch = ?'
        params: list[object] = [epoch]
        if partitions is not None:
            sql += ' AND list_contains(?, "partition")'
            params.append(sorted(partitions))
        return {int(p): int(end) for p, end in self.store.query(sql + ' GROUP BY "partition"', params)}

    def done_urls(self, items: list[FrontierURL]) -> set[tuple[str, str]]:
        """The (crawl_id, url) pairs among ``items`` that the crawl already finished."""
        return {key for key, row in self.frontier_rows(items).items() if row.state not in PENDING_STATES}

    def frontier_rows(self, items: list[FrontierURL]) -> dict[tuple[str, str], FrontierRow]:
        """The ``frontier`` row of each (crawl_id, url) pair among ``items`` that has one (that the
        crawl admitted, within its scope and caps), in one read."""
        if not items:
            return {}
        columns = {"crawl_id": ("VARCHAR", [i.crawl_id for i in items]), "url": ("VARCHAR", [i.url for i in items])}
        with self.store.read() as con, bound_rows(con, "items", columns):
            rows = con.execute(
                """SELECT DISTINCT f.crawl_id, f.url, f.state, f.depth FROM frontier f
                   JOIN items i USING (crawl_id, url)"""
            ).fetchall()
        return {(c, u): FrontierRow(URLState(state), depth) for c, u, state, depth in rows}

    def batch_landed(self, batch_id: str) -> bool:
        """True once the batch's landing transaction committed (its items are recorded)."""
        return bool(self.store.query("SELECT count(*) FROM batch_items WHERE batch_id = ?", [batch_id])[0][0])

    def crawl_states(self, crawl_ids: set[str]) -> dict[str, CrawlState]:
        """The state of each registered crawl among ``crawl_ids`` (unknown ones are left out)."""
        if not crawl_ids:
            return {}
        rows = self.store.query("SELECT crawl_id, state FROM crawls WHERE list_contains(?, crawl_id)",
                                [sorted(crawl_ids)])
        return {crawl_id: CrawlState(state or CrawlState.ACTIVE) for crawl_id, state in rows}

    def partition_priorities(self, partition_of: Callable[[str], int], max_priority: int) -> dict[int, int]:
        """The highest priority (clamped to ``max_priority``) of an active crawl with URLs queued
        in each frontier partition, for partitions where it is above 0; ``partition_of`` maps a
        host (the frontier topic's key) to its partition. One grouped read, and none of it when no
        active crawl has a priority."""
        prioritised = f"c.priority > 0 AND coalesce(c.state, {_ACTIVE}) = {_ACTIVE}"
        if not self.store.query(f"SELECT count(*) FROM crawls c WHERE {prioritised}")[0][0]:
            return {}  # the usual case: no frontier scan at all
        rows = self.store.query(
            f"""SELECT f.host, least(max(c.priority), ?) FROM frontier f JOIN crawls c USING (crawl_id)
                WHERE {prioritised} AND f.state = {sql_literal(URLState.QUEUED)}
                GROUP BY f.host""", [max_priority])
        priorities: dict[int, int] = {}
        for host, priority in rows:
            partition = partition_of(host)
            priorities[partition] = max(priorities.get(partition, 0), int(priority))
        return {p: v for p, v in priorities.items() if v > 0}

    def known_crawls(self, crawl_ids: set[str]) -> set[str]:
        """The ids among ``crawl_ids`` of crawls that were registered."""
        if not crawl_ids:
            return set()
        rows = self.store.query("SELECT crawl_id FROM crawls WHERE list_contains(?, crawl_id)",
                                [sorted(crawl_ids)])
        return {r[0] for r in rows}
