"""Admission: which candidate URLs enter a crawl's frontier, each pass in one store transaction.

A candidate enters when the crawl's scope, allow and deny patterns (:class:`crawl_platform.urls.CrawlScope`)
and ``max_depth`` admit it, it is new to the crawl, the crawl is not cancelled, and the crawl's
``max_pages`` and ``max_pages_per_host`` leave room (a paused crawl's new URLs are kept
``paused``); shallower URLs go first, so a cap cuts the deepest ones.
Candidates are a new crawl's seeds, the links of a landed batch (whose items the same
transaction closes, so a crawl never looks finished while its links are being admitted), or
URLs found elsewhere (sitemaps). Neighbours: :mod:`crawl_platform.pipeline.landing` writes the
links read here, :mod:`.state_store` inserts the admitted rows (the capped query is
:mod:`crawl_platform.store.frontier`'s), and :mod:`.publisher` puts them on the bus after the
transaction committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from crawl_platform.bus.messages import CrawlRequest, FrontierURL
from crawl_platform.frontier.schedules import base_id, record_schedule
from crawl_platform.frontier.state_store import URLStateStore, utc_now
from crawl_platform.states import BatchOutcome, CrawlState
from crawl_platform.store import crawls, frontier
from crawl_platform.store.crawls import OPTION_NAMES
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.revisits import drop_not_due, pass_candidates
from crawl_platform.urls import CrawlScope, canonicalize, host_of

# Items whose page's links are followed: an error page (a 404 with a body) has links too.
LINK_OUTCOMES = (BatchOutcome.FETCHED, BatchOutcome.FAILED)


class RegistrationConflictError(ValueError):
    """A crawl request that would change a registered crawl (same id, other options), or a pass of
    a recurring crawl (``<family>@<stamp>``) that is not its family's; ``str(err)`` is one line."""


def _options(request: CrawlRequest, seeds: list[str]) -> tuple[object, ...]:
    """The request's options as a ``crawls`` row stores them (``OPTION_COLUMNS`` order,
    :mod:`crawl_platform.store.crawls`)."""
    return (seeds, request.max_pages, request.max_depth, request.scope, list(request.allow_patterns),
            list(request.deny_patterns), request.max_pages_per_host, request.user_agent, request.use_sitemaps,
            request.host_delay_ms, request.host_concurrency, request.priority, request.extract_rules,
            request.render, request.screenshots)


def _stored_options(row: tuple[Any, ...]) -> tuple[object, ...]:
    """A ``crawls`` row's options with NULLs (columns older lakes lack) as the request's defaults."""
    seeds, max_pages, max_depth, scope, allow, deny, per_host, agent, sitemaps, delay, concurrency, priority, \
        rules, render, screenshots = row
    return (list(seeds or []), max_pages, max_depth, scope, list(allow or []), list(deny or []),
            per_host or 0, agent or "", bool(sitemaps), delay or 0, concurrency or 0, priority or 0, rules or "",
            render or "never", bool(screenshots))


def registration_conflict(con: duckdb.DuckDBPyConnection, request: CrawlRequest) -> str | None:
    """Why ``request`` may not be registered, or None: its id is registered with other options, or
    it is a pass (``<family>@<stamp>``) whose family has no crawl or another's options. Reads only;
    None also when the crawl is registered with exactly these options (a delivery again)."""
    return _registration(con, request)[1]


def _registration(con: duckdb.DuckDBPyConnection, request: CrawlRequest) -> tuple[bool, str | None]:
    """Whether the crawl id is registered, and :func:`registration_conflict`'s answer."""
    seeds = sorted({canonicalize(s) for s in request.seeds})
    wanted = _options(request, seeds)
    row = crawls.options_of(con, request.crawl_id)
    if row is not None:
        different = [name for name, old, new in zip(OPTION_NAMES, _stored_options(row), wanted, strict=True)
                     if old != new]
        return True, (f"crawl {request.crawl_id} is registered already with other {', '.join(different)}: "
                      "submit it under a new id") if different else None
    family = base_id(request.crawl_id)
    if family == request.crawl_id:
        return False, None
    latest = crawls.latest_family_options(con, family)
    if latest is None:
        return False, (f"crawl {request.crawl_id}: '@' is reserved for the passes of recurring crawls, and there "
                       f"is no crawl {family}")
    if _stored_options(latest) != wanted:
        return False, (f"crawl {request.crawl_id}: a pass of the recurring crawl {family} keeps its options, "
                       "and these differ")
    return False, None


@dataclass(frozen=True)
class Admitted:
    """One pass's result: the URLs that entered (the caller publishes them) out of ``candidates``
    in-scope candidates."""

    urls: list[FrontierURL]
    candidates: int


class Admission:
    """Admits URLs into crawls within their scope and caps; each method is one store transaction."""

    def __init__(self, store: CrawlStore, states: URLStateStore) -> None:
        self.store = store
        self.states = states

    def conflict(self, request: CrawlRequest) -> str | None:
        """See :func:`registration_conflict` (one read of the lake)."""
        with self.store.read() as con:
            return registration_conflict(con, request)

    def register(self, request: CrawlRequest) -> Admitted:
        """Record a crawl and admit its (valid) seeds at depth 0; idempotent per crawl id. Raises
        :class:`RegistrationConflictError` for a request that would change a registered crawl or
        is a pass not of its family (:func:`registration_conflict`)."""
        seeds = sorted({canonicalize(s) for s in request.seeds})
        # A crawl id is registered once, in one transaction with its seeds and schedule (a pass of a
        # recurring crawl has an id of its own): a request delivered again, such as the seeds
        # sensor's copy of one the CLI registered itself, finds it there with the same options and
        # needs no write.
        with self.store.read() as con:
            known, conflict = _registration(con, request)
        if conflict is not None:
            raise RegistrationConflictError(conflict)
        if known:
            return Admitted([], len(seeds))
        with self.store.write() as con:
            # Again under the write lock: another writer may have registered the id meanwhile.
            conflict = registration_conflict(con, request)
            if conflict is not None:
                raise RegistrationConflictError(conflict)
            crawls.insert_crawl(con, request.crawl_id, [
                seeds, request.scope, request.max_pages, request.max_depth,
                datetime.fromtimestamp(request.submitted_at, UTC).replace(tzinfo=None), utc_now(),
                list(request.allow_patterns), list(request.deny_patterns), request.max_pages_per_host,
                request.user_agent, request.use_sitemaps, CrawlState.ACTIVE.value, request.host_delay_ms,
                request.host_concurrency, request.priority, request.extract_rules or None,
                None if request.render == "never" else request.render, request.screenshots or None])
            record_schedule(con, request)
            # A pass of a recurring crawl starts from what is due, not from the whole site.
            submitted = datetime.fromtimestamp(request.submitted_at, UTC).replace(tzinfo=None)
            admitted = self._admit(con, pass_candidates(con, request.crawl_id, seeds, submitted))
        return Admitted(admitted, len(seeds))

    def expand(self, batch_id: str) -> Admitted:
        """Admit the in-scope links of a landed batch and close its items, in one transaction.

        The links are read and checked against their crawls' scopes before it, with a read
        connection, so matching patterns never holds the lake's write lock. Nothing they depend
        on changes once the batch has landed (its items' outcomes and links, a crawl's seeds,
        scope, patterns and depth); what does (the frontier, a crawl's state and caps, what is
        due) is decided in the write transaction, which also closes the items, so a crawl never
        looks finished while its links are being admitted. A newer version of a source page
        landing in between gives the links of one version or the other, as landing a moment
        later would. The batch's postponed URLs (its byte budget ran out before them) come back
        with the admitted ones, to be published again."""
        with self.store.read() as con:
            # Each distinct (crawl, link target) once, at its shallowest; a crawl's scope (its
            # seeds, maybe thousands) is read once per crawl, not once per link.
            rows = frontier.link_targets(con, batch_id, LINK_OUTCOMES)
            scope_rows = crawls.scopes_of_batch(con, batch_id)
        scopes = {crawl_id: CrawlScope.from_row(scope, seeds, allow, deny, crawl_id)
                  for crawl_id, scope, seeds, allow, deny in scope_rows}
        in_scope = [(crawl_id, url, depth) for crawl_id, url, depth in rows if scopes[crawl_id].admits(url)]
        with self.store.write() as con:
            candidates = drop_not_due(con, in_scope)
            admitted = self._admit(con, candidates)
            self.states.close_batch(con, batch_id)
            again = self.states.reopen_postponed(con, batch_id)  # its byte budget ran out before them
        return Admitted(admitted + again, len(candidates))

    def admit(self, crawl_id: str, urls: list[str], depth: int) -> Admitted:
        """Admit already scope-checked URLs of a crawl at ``depth`` (e.g. from its sitemaps); the
        crawl's page caps apply."""
        with self.store.write() as con:
            candidates = drop_not_due(con, [(crawl_id, url, depth) for url in urls])
            admitted = self._admit(con, candidates)
        return Admitted(admitted, len(candidates))

    def _admit(self, con: duckdb.DuckDBPyConnection, candidates: list[tuple[str, str, int]]) -> list[FrontierURL]:
        """Insert new (crawl, url) pairs as ``discovered``, within each crawl's max_pages and
        max_pages_per_host; shallower URLs first, so a cap cuts the deepest ones."""
        if not candidates:
            return []
        admitted = self.states.insert_discovered(con, [(crawl_id, url, depth, host_of(url))
                                                        for crawl_id, url, depth in candidates])
        # A paused crawl's new URLs (links of a batch that was fetching when the pause came) are
        # kept ``paused``, not published: resume publishes them with the rest.
        paused = self.states.hold_paused(con, {u.crawl_id for u in admitted})
        return [u for u in admitted if u.crawl_id not in paused]
