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
from crawl_platform.states import PENDING_STATES, CrawlState, URLState
from crawl_platform.store import batches, crawls, frontier
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


class FrontierReadModel:
    """Read-only questions about crawls and their frontier, answered from the store alone."""

    def __init__(self, store: CrawlStore) -> None:
        self.store = store

    def status(self, crawl_id: str | None = None) -> list[CrawlStatus]:
        """Every crawl in registration order (or only ``crawl_id``; empty when it is unknown)."""
        with self.store.read() as con:
            return [CrawlStatus(*row) for row in frontier.progress(con, crawl_id)]

    def orphaned_count(self, older_than_s: float) -> int:
        """URLs ``queued`` for more than ``older_than_s``: when no batch run is in flight and the
        topic has no unplanned messages, nothing will ever fetch them (their run failed for good,
        or their message was lost), so they must be published again."""
        with self.store.read() as con:
            return frontier.queued_before(con, utc_now() - timedelta(seconds=older_than_s))

    def queued_hosts(self) -> int:
        """Hosts with URLs ``queued`` (published, not yet fetched): how many the next batches
        spread over, which sizes them (:meth:`Settings.partition_batch_size`)."""
        with self.store.read() as con:
            return frontier.queued_hosts(con)

    def landed_ends(self, epoch: int, partitions: Collection[int] | None = None) -> dict[int, int]:
        """Frontier partition -> the end of the last offset range a batch of ``epoch`` landed there
        (``partitions``: only those), from ``batch_ranges``; what a continuing batch run and the
        frontier sensor go on from (:mod:`crawl_platform.pipeline.continuation`)."""
        with self.store.read() as con:
            return {int(p): int(end) for p, end in batches.landed_ends(con, epoch, partitions)}

    def done_urls(self, items: list[FrontierURL]) -> set[tuple[str, str]]:
        """The (crawl_id, url) pairs among ``items`` that the crawl already finished."""
        return {key for key, row in self.frontier_rows(items).items() if row.state not in PENDING_STATES}

    def frontier_rows(self, items: list[FrontierURL]) -> dict[tuple[str, str], FrontierRow]:
        """The ``frontier`` row of each (crawl_id, url) pair among ``items`` that has one (that the
        crawl admitted, within its scope and caps), in one read."""
        if not items:
            return {}
        with self.store.read() as con:
            rows = frontier.rows_of(con, [(i.crawl_id, i.url) for i in items])
        return {(c, u): FrontierRow(URLState(state), depth) for c, u, state, depth in rows}

    def batch_landed(self, batch_id: str) -> bool:
        """True once the batch's landing transaction committed (its items are recorded)."""
        with self.store.read() as con:
            return batches.has_landed(con, batch_id)

    def crawl_states(self, crawl_ids: set[str]) -> dict[str, CrawlState]:
        """The state of each registered crawl among ``crawl_ids`` (unknown ones are left out)."""
        if not crawl_ids:
            return {}
        with self.store.read() as con:
            rows = crawls.states_of(con, crawl_ids)
        return {crawl_id: CrawlState(state or CrawlState.ACTIVE) for crawl_id, state in rows}

    def partition_priorities(self, partition_of: Callable[[str], int], max_priority: int) -> dict[int, int]:
        """The highest priority (clamped to ``max_priority``) of an active crawl with URLs queued
        in each frontier partition, for partitions where it is above 0; ``partition_of`` maps a
        host (the frontier topic's key) to its partition. One grouped read, and none of it when no
        active crawl has a priority."""
        with self.store.read() as con:
            if not frontier.any_prioritised(con):
                return {}  # the usual case: no frontier scan at all
        with self.store.read() as con:
            rows = frontier.queued_host_priorities(con, max_priority)
        priorities: dict[int, int] = {}
        for host, priority in rows:
            partition = partition_of(host)
            priorities[partition] = max(priorities.get(partition, 0), int(priority))
        return {p: v for p, v in priorities.items() if v > 0}

    def known_crawls(self, crawl_ids: set[str]) -> set[str]:
        """The ids among ``crawl_ids`` of crawls that were registered."""
        if not crawl_ids:
            return set()
        with self.store.read() as con:
            return crawls.known_crawls(con, crawl_ids)
