"""URL states and batch outcomes (crawl_platform.states): the transition table, and that the
enums hold exactly the values the schema stores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crawl_platform.states import (
    CLOSED_STATES,
    PENDING_STATES,
    BatchOutcome,
    CrawlState,
    TransitionError,
    URLState,
    check_transition,
    sources_of,
)
from crawl_platform.store.frontier import sql_list

SCHEMA = Path(__file__).resolve().parents[2] / "crawl_platform" / "store" / "schema.sql"

D, Q, F, X, N = URLState.DISCOVERED, URLState.QUEUED, URLState.FETCHED, URLState.FAILED, URLState.DISALLOWED
P, C = URLState.PAUSED, URLState.CANCELLED

ALLOWED = {
    (None, D),  # admitted
    (None, F), (None, X), (None, N),  # a batch item the frontier never knew, closed directly
    (D, Q),  # the broker acknowledged it
    (Q, Q),  # re-published: its clock restarts
    (Q, D),  # its batch's byte budget ran out before it: published again
    (D, F), (D, X), (D, N), (Q, F), (Q, X), (Q, N),  # its batch was expanded
    (D, P), (Q, P),  # its crawl was paused
    (D, C), (Q, C), (P, C),  # its crawl was cancelled
    (P, D),  # its crawl was resumed: published again
    (P, F), (P, X), (P, N),  # a batch already fetching it when the pause came
}
EVERY_PAIR = [(s, t) for s in (None, *URLState) for t in URLState]


@pytest.mark.parametrize(("source", "target"), sorted(ALLOWED, key=str))
def test_allowed_transitions(source, target):
    check_transition(source, target)
    assert source is None or source.can_become(target)


@pytest.mark.parametrize(("source", "target"), [p for p in EVERY_PAIR if p not in ALLOWED], ids=str)
def test_every_other_transition_is_refused(source, target):
    with pytest.raises(TransitionError, match=f"cannot go from .* to {target}"):
        check_transition(source, target)
    assert source is None or not source.can_become(target)


def test_closed_states_are_final_and_pending_ones_are_not():
    assert set(PENDING_STATES) | set(CLOSED_STATES) | {P, C} == set(URLState)
    assert [s for s in URLState if s.pending] == [D, Q]
    for state in (*CLOSED_STATES, C):
        assert not any(state.can_become(t) for t in URLState)


def test_sources_of_are_what_the_store_updates_match():
    assert sources_of(Q) == (D, Q)
    assert sources_of(*CLOSED_STATES) == (D, Q, P)
    assert sql_list(sources_of(*CLOSED_STATES)) == "('discovered', 'queued', 'paused')"
    assert sources_of(C) == (D, Q, P)
    assert sources_of(P) == (D, Q)


def test_a_crawl_may_be_paused_resumed_and_cancelled_but_a_cancelled_crawl_is_final():
    a, p, c = CrawlState.ACTIVE, CrawlState.PAUSED, CrawlState.CANCELLED
    allowed = {(s, t) for s in CrawlState for t in CrawlState if s.can_become(t)}
    assert allowed == {(a, p), (a, c), (p, a), (p, c)}


def test_batch_outcomes_are_the_closing_states_skipped_and_postponed():
    assert {o.closes_as for o in BatchOutcome} == {*CLOSED_STATES, None}
    assert BatchOutcome.SKIPPED.closes_as is None
    assert BatchOutcome.POSTPONED.closes_as is None
    assert [o.value for o in BatchOutcome if o.closes_as] == [s.value for s in CLOSED_STATES]


def _schema_values(column: str) -> set[str]:
    (comment,) = re.findall(rf"^\s*{column}\s+VARCHAR NOT NULL,?\s*--\s*(.+)$", SCHEMA.read_text(), re.MULTILINE)
    return {v.strip() for v in comment.split("|")}


def test_every_state_the_schema_lists_is_a_url_state():
    assert _schema_values("state") == {s.value for s in URLState}


def test_every_outcome_the_schema_lists_is_a_batch_outcome():
    assert _schema_values("outcome") == {o.value for o in BatchOutcome}
