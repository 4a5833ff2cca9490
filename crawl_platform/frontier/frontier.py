"""The crawl frontier as one object: the facade the batch, the intake, the sensors and tests use.

DuckDB's ``frontier`` table is the record; the bus's frontier topic only carries work. A URL is
inserted as ``discovered``, becomes ``queued`` once the broker acknowledged it, and ends as
``fetched``, ``failed`` or ``disallowed`` when its batch is expanded (:mod:`crawl_platform.states`). Anything
left ``discovered`` (the broker lost or refused it) is published again on a later pass, so a
broker that forgets everything costs time, never URLs. :class:`Frontier` composes the four parts
that do the work, one job each: :mod:`.state_store` (writes to the table), :mod:`.admission`
(which URLs enter, one transaction per pass), :mod:`.publisher` (the bus, after commit) and
:mod:`.read_model` (status and the read-only questions; a read-only caller uses it alone, with
no bus). Neighbours: :mod:`crawl_platform.pipeline.landing` writes what :meth:`Frontier.expand`
reads; :mod:`crawl_platform.bus.kafka` carries what it publishes.
"""

from __future__ import annotations

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import CrawlControl, CrawlRequest, FrontierURL
from crawl_platform.frontier.admission import Admission
from crawl_platform.frontier.control import ControlOutcome, CrawlController
from crawl_platform.frontier.publisher import STALE_DISCOVERED_S, FrontierGrowth, FrontierPublisher
from crawl_platform.frontier.read_model import CrawlStatus, FrontierReadModel
from crawl_platform.frontier.state_store import URLStateStore
from crawl_platform.store.database import CrawlStore

__all__ = ["CrawlStatus", "Frontier", "FrontierGrowth"]


class Frontier:
    """Admits URLs into crawls and keeps the bus's frontier topic in step with the store."""

    def __init__(self, store: CrawlStore, bus: Bus) -> None:
        self.store = store
        self.bus = bus
        self.states = URLStateStore(store)
        self.admission = Admission(store, self.states)
        self.publisher = FrontierPublisher(bus, self.states)
        self.read_model = FrontierReadModel(store)
        self.controller = CrawlController(store, self.states, self.publisher)

    # --- admitting and publishing: one store transaction, then the bus ---------------------------
    def register(self, request: CrawlRequest) -> FrontierGrowth:
        """Record a crawl and admit its (valid) seeds at depth 0; idempotent per crawl id."""
        admitted = self.admission.register(request)
        return self.publisher.publish(admitted.urls, admitted.candidates)

    def expand(self, batch_id: str) -> FrontierGrowth:
        """Admit the in-scope links of a landed batch and close its items, in one transaction."""
        admitted = self.admission.expand(batch_id)
        return self.publisher.publish(admitted.urls, admitted.candidates)

    def admit(self, crawl_id: str, urls: list[str], depth: int) -> FrontierGrowth:
        """Admit already scope-checked URLs of a crawl at ``depth`` (e.g. from its sitemaps) and
        publish the new ones; the crawl's page caps apply."""
        admitted = self.admission.admit(crawl_id, urls, depth)
        return self.publisher.publish(admitted.urls, admitted.candidates)

    def republish_stale(self, older_than_s: float = STALE_DISCOVERED_S) -> FrontierGrowth:
        """Publish again every URL still ``discovered`` after ``older_than_s`` (lost by the broker)."""
        return self.publisher.republish_stale(older_than_s)

    def requeue_all_pending(self) -> FrontierGrowth:
        """After the broker lost its data: publish every URL that is known but not fetched."""
        return self.publisher.requeue_all_pending()

    def control(self, command: CrawlControl) -> ControlOutcome:
        """Cancel, pause or resume a crawl (see :mod:`.control`); idempotent."""
        return self.controller.apply(command)

    # --- reading --------------------------------------------------------------------------------
    def orphaned_count(self, older_than_s: float) -> int:
        """See :meth:`.read_model.FrontierReadModel.orphaned_count`."""
        return self.read_model.orphaned_count(older_than_s)

    def done_urls(self, items: list[FrontierURL]) -> set[tuple[str, str]]:
        """The (crawl_id, url) pairs among ``items`` that the crawl already finished."""
        return self.read_model.done_urls(items)

    def batch_landed(self, batch_id: str) -> bool:
        """True once the batch's landing transaction committed (its items are recorded)."""
        return self.read_model.batch_landed(batch_id)

    def known_crawls(self, crawl_ids: set[str]) -> set[str]:
        return self.read_model.known_crawls(crawl_ids)

    def status(self, crawl_id: str | None = None) -> list[CrawlStatus]:
        return self.read_model.status(crawl_id)
