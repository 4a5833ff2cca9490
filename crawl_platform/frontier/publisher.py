"""The frontier publisher: puts admitted URLs on the bus and records the broker's acknowledgements.

Publishing happens after the admitting transaction committed; the URLs the broker confirmed are
then marked ``queued`` in a second transaction, so a URL the broker lost or refused stays
``discovered`` and is published again by :meth:`FrontierPublisher.republish_stale`. After a
broker lost its log, :meth:`FrontierPublisher.requeue_all_pending` sends every unfinished URL
again. Neighbours: :mod:`.admission` hands over what it admitted, :mod:`.state_store` records the
acks, :func:`crawl_platform.bus.publishing.publish_frontier` encodes and keys the messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.frontier.state_store import URLStateStore, utc_now
from crawl_platform.states import PENDING_STATES, URLState

STALE_DISCOVERED_S = 30


@dataclass(frozen=True)
class FrontierGrowth:
    """What one pass added: URLs admitted to the frontier, and how many the broker confirmed."""

    discovered: int
    admitted: int
    published: int
    unconfirmed: int


class FrontierPublisher:
    """Keeps the bus's frontier topic in step with the URL state store."""

    def __init__(self, bus: Bus, states: URLStateStore) -> None:
        self.bus = bus
        self.states = states

    def publish(self, urls: list[FrontierURL], discovered: int, refresh_queued: bool = False) -> FrontierGrowth:
        """Publish ``urls`` (admitted out of ``discovered`` candidates) and mark the confirmed ones
        ``queued``; with ``refresh_queued``, already queued ones restart their clock too."""
        if not urls:
            return FrontierGrowth(discovered, 0, 0, 0)
        delivered = publish_frontier(self.bus, urls)
        confirmed = [u for u, ok in zip(urls, delivered, strict=True) if ok]
        self.states.mark_queued(confirmed, refresh_queued)
        return FrontierGrowth(discovered, len(urls), len(confirmed), len(urls) - len(confirmed))

    def republish_stale(self, older_than_s: float = STALE_DISCOVERED_S) -> FrontierGrowth:
        """Publish again every URL still ``discovered`` after ``older_than_s`` (lost by the broker)."""
        urls = self.states.urls_in((URLState.DISCOVERED,), utc_now() - timedelta(seconds=older_than_s))
        return self.publish(urls, len(urls))

    def requeue_all_pending(self) -> FrontierGrowth:
        """After the broker lost its data: publish every URL that is known but not fetched."""
        urls = self.states.urls_in(PENDING_STATES)
        return self.publish(urls, len(urls), refresh_queued=True)
