"""The states a URL goes through in a crawl's frontier, and every allowed transition, in one place.

A URL's row in the ``frontier`` table is admitted ``discovered``, becomes ``queued`` once the broker
acknowledged its message (a re-publish refreshes ``queued``), and is closed ``fetched``, ``failed``
or ``disallowed`` when its batch is expanded; the closed states are final. A crawl paused by its
user moves its pending rows to ``paused`` (resume makes them ``discovered`` again and publishes
them); a cancelled crawl's unfinished rows end ``cancelled``, a final state. A batch item
(``batch_items.outcome``) ends in one of the closing states, ``skipped`` when the run did not
fetch it (a duplicate delivery), which leaves its frontier row alone, or ``postponed`` when the
batch did not land it (its byte budget ran out before the URL's turn, or another batch landed the
URL while this one fetched it unchanged): its row goes back to ``discovered`` and is published
again, for a later batch. The values are the stored
column values docs/tables.md documents, below the store, which renders them in its SQL
(:mod:`crawl_platform.store.frontier`). Neighbours: :mod:`crawl_platform.frontier.state_store`
checks every change of a row against these transitions, and :mod:`crawl_platform.pipeline.landing`
picks each item's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class URLState(StrEnum):
    """State of one URL in one crawl (``frontier.state``)."""

    DISCOVERED = "discovered"  # admitted, the broker has not acknowledged its message yet
    QUEUED = "queued"  # on the frontier topic, waiting for a batch
    FETCHED = "fetched"  # a response below 400 (a 304 too)
    FAILED = "failed"  # an error status, or no response at all
    DISALLOWED = "disallowed"  # robots.txt forbids it
    PAUSED = "paused"  # its crawl is paused: kept, fetched by no batch until the crawl is resumed
    CANCELLED = "cancelled"  # its crawl was cancelled before the URL was fetched

    @property
    def pending(self) -> bool:
        """True while the crawl still owes this URL a fetch."""
        return self in PENDING_STATES

    def can_become(self, target: URLState) -> bool:
        return target in TRANSITIONS[self]


PENDING_STATES: tuple[URLState, ...] = (URLState.DISCOVERED, URLState.QUEUED)
CLOSED_STATES: tuple[URLState, ...] = (URLState.FETCHED, URLState.FAILED, URLState.DISALLOWED)

# Which state each state may move to. ``None`` is "no row yet": a URL is admitted ``discovered``,
# except an item of a batch that a producer outside the platform put on the topic, which is
# recorded directly in its closing state.
TRANSITIONS: Mapping[URLState | None, frozenset[URLState]] = MappingProxyType({
    None: frozenset({URLState.DISCOVERED, *CLOSED_STATES}),
    # broker ack, batch closed, crawl paused or cancelled
    URLState.DISCOVERED: frozenset({URLState.QUEUED, *CLOSED_STATES, URLState.PAUSED, URLState.CANCELLED}),
    # re-publish refresh, batch closed, postponed by its batch (published again), crawl paused or cancelled
    URLState.QUEUED: frozenset({URLState.QUEUED, *CLOSED_STATES, URLState.DISCOVERED, URLState.PAUSED,
                                URLState.CANCELLED}),
    # resumed (published again), cancelled, or closed by a batch already fetching when the pause came
    URLState.PAUSED: frozenset({URLState.DISCOVERED, URLState.CANCELLED, *CLOSED_STATES}),
    URLState.FETCHED: frozenset(),
    URLState.FAILED: frozenset(),
    URLState.DISALLOWED: frozenset(),
    URLState.CANCELLED: frozenset(),
})


class CrawlState(StrEnum):
    """State of a whole crawl (``crawls.state``; NULL in a lake older than the column is ``active``),
    set by ``crawl-platform cancel|pause|resume``. A crawl with nothing left to fetch shows as
    ``finished`` in ``status``; that is derived, never stored."""

    ACTIVE = "active"  # its URLs are fetched and its links admitted
    PAUSED = "paused"  # its URLs are kept (``paused``) and none is fetched
    CANCELLED = "cancelled"  # its unfinished URLs are dropped and no new one is admitted; final

    def can_become(self, target: CrawlState) -> bool:
        return target in CRAWL_TRANSITIONS[self]


CRAWL_TRANSITIONS: Mapping[CrawlState, frozenset[CrawlState]] = MappingProxyType({
    CrawlState.ACTIVE: frozenset({CrawlState.PAUSED, CrawlState.CANCELLED}),
    CrawlState.PAUSED: frozenset({CrawlState.ACTIVE, CrawlState.CANCELLED}),
    CrawlState.CANCELLED: frozenset(),
})


class BatchOutcome(StrEnum):
    """How one item of a landed batch ended (``batch_items.outcome``): a closing URL state,
    ``skipped`` or ``postponed``."""

    FETCHED = URLState.FETCHED.value
    FAILED = URLState.FAILED.value
    DISALLOWED = URLState.DISALLOWED.value
    SKIPPED = "skipped"  # not fetched by this run (a duplicate delivery): the URL's row stays as it is
    POSTPONED = "postponed"  # not landed (byte budget spent, or raced by another batch): published again

    @property
    def closes_as(self) -> URLState | None:
        """The state the item's URL is closed in when the batch is expanded; None for ``skipped``
        and ``postponed``."""
        return None if self in NOT_CLOSING else URLState(self.value)


NOT_CLOSING: tuple[BatchOutcome, ...] = (BatchOutcome.SKIPPED, BatchOutcome.POSTPONED)


class TransitionError(ValueError):
    """A state change that :data:`TRANSITIONS` does not allow."""


def check_transition(source: URLState | None, target: URLState) -> None:
    """Raise :class:`TransitionError` unless a URL in ``source`` (None: no row yet) may become ``target``."""
    if target not in TRANSITIONS[source]:
        raise TransitionError(f"a URL cannot go from {source or 'no row'} to {target}")


def sources_of(*targets: URLState) -> tuple[URLState, ...]:
    """The states of existing rows that may become every one of ``targets``, in declaration order:
    what an ``UPDATE ... WHERE state IN (...)`` making that change must match."""
    return tuple(s for s in URLState if all(s.can_become(t) for t in targets))
