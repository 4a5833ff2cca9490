"""Page events: one message per landed page version on the pages topic, for whoever subscribes.

The ``pages`` table is the outbox. After a batch's landing committed, its frontier step
(:func:`crawl_platform.pipeline.batch.expand_batch`) reads the versions the batch landed and
publishes them keyed by URL; once the broker confirmed every one, the batch is recorded in
``page_event_batches``. A batch that is not recorded there (the broker refused some events, or
the run died between its landing and its events) is published again: by the step's retry, and,
once the crawl loop is idle (the frontier sensor, :class:`crawl_platform.pipeline.loop.CrawlLoop`),
by a sweep of the last day's unrecorded batches; the sweep reads ``pages``, so it stays off the
batches' path. Delivery is therefore at least once,
in order per URL; ``(url, version)`` identifies an event. Neighbours: :mod:`crawl_platform.pipeline.landing`
writes the rows, :mod:`crawl_platform.bus.publishing` puts the messages on the bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import PageEvent
from crawl_platform.bus.publishing import publish_page_events
from crawl_platform.store import page_events
from crawl_platform.store.database import CrawlStore

SWEEP_WITHIN = timedelta(days=1)  # how far back unrecorded batches are looked for
SWEEP_AFTER = timedelta(minutes=2)  # a younger batch may still be in its own frontier step


@dataclass(frozen=True)
class EventsPublished:
    """What one pass published: ``events`` confirmed, ``unconfirmed`` refused or unanswered
    (their batches stay unrecorded and are published again), over ``batches`` batches."""

    batches: int = 0
    events: int = 0
    unconfirmed: int = 0


class PageEventPublisher:
    """Publishes the page events of landed batches, and records the batches the broker confirmed."""

    def __init__(self, store: CrawlStore, bus: Bus) -> None:
        self.store = store
        self.bus = bus

    def publish_batch(self, batch_id: str) -> EventsPublished:
        """Publish the versions ``batch_id`` landed (none: nothing to publish or record)."""
        return self._publish([batch_id])

    def republish_unrecorded(self, now: datetime | None = None) -> EventsPublished:
        """Publish again the batches of the last :data:`SWEEP_WITHIN` that landed versions but were
        never recorded as published, once they are older than :data:`SWEEP_AFTER`."""
        now = now or datetime.now(UTC).replace(tzinfo=None)
        with self.store.read() as con:
            batch_ids = page_events.unrecorded_batches(con, now - SWEEP_WITHIN, now - SWEEP_AFTER)
        return self._publish(batch_ids) if batch_ids else EventsPublished()

    def _publish(self, batch_ids: list[str]) -> EventsPublished:
        events = self._events(batch_ids)
        acks = publish_page_events(self.bus, events) if events else []
        refused = {e.batch_id for e, ok in zip(events, acks, strict=True) if not ok}
        counts: dict[str, int] = {}
        for event in events:
            counts[event.batch_id] = counts.get(event.batch_id, 0) + 1
        # A batch that landed no version has no events, and nothing to record: the sweep only
        # looks at batches with rows in pages.
        confirmed = [b for b in batch_ids if counts.get(b) and b not in refused]
        if confirmed:
            now = datetime.now(UTC).replace(tzinfo=None)
            with self.store.write() as con:
                page_events.record_published(con, confirmed, [counts[b] for b in confirmed], now)
        return EventsPublished(len(batch_ids), sum(acks), len(acks) - sum(acks))

    def _events(self, batch_ids: list[str]) -> list[PageEvent]:
        with self.store.read() as con:
            rows = page_events.batch_versions(con, batch_ids)
        return [
            PageEvent(url=url, crawl_id=crawl_id, version=version, status=status, content_hash=content_hash,
                      fetched_at=fetched_at.isoformat() + "Z", batch_id=batch_id, error=error,
                      warc_file=warc_file, warc_offset=warc_offset, warc_length=warc_length)
            for url, crawl_id, version, status, content_hash, fetched_at, batch_id, error,
            warc_file, warc_offset, warc_length in rows
        ]
