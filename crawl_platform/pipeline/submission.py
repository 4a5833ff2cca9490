"""Turning what a user typed into a validated crawl request on the seeds topic.

Shared by the CLI (``crawl-platform crawl``) and the Dagster Launchpad job, so both reject the
same bad input with the same one-line message and nothing is enqueued when any seed is bad. The
CLI then registers the crawl itself where it reaches the lake
(:func:`crawl_platform.pipeline.registration.register_now`, the path every registration takes), so the
first batch starts at the frontier sensor's next tick instead of after an intake run.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from typing import get_args

from crawl_platform.bus.base import Bus, BusError
from crawl_platform.bus.messages import (
    MAX_DEPTH_LIMIT,
    MAX_HOST_CONCURRENCY,
    MAX_HOST_DELAY_MS,
    MAX_PAGES_LIMIT,
    MAX_PRIORITY,
    MAX_USER_AGENT_LENGTH,
    RENDER_MODES,
    CrawlRequest,
    crawl_id_problem,
)
from crawl_platform.bus.publishing import publish_crawl_request
from crawl_platform.config import Scope, Settings
from crawl_platform.extract.rules import ExtractionRules
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.schedules import Schedule, parse_schedule
from crawl_platform.patterns import check_patterns
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError
from crawl_platform.store.extensions import ExtensionError
from crawl_platform.urls import InvalidURLError, canonicalize, host_of

SCOPES: tuple[Scope, ...] = get_args(Scope)


def new_crawl_id(first_seed: str) -> str:
    """A readable, unique id: ``<host>-<UTC time>-<4 hex>`` (a port's ``:`` made ``_``, an IPv6
    address's brackets and colons too)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", host_of(first_seed))[:100].strip("._-") or "crawl"
    return f"{host}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:4]}"


def build_crawl_request(seeds: list[str], crawl_id: str | None = None, max_pages: int = 10_000,
                        max_depth: int = 10, scope: str = "host", *, allow: Sequence[str] = (),
                        deny: Sequence[str] = (), max_pages_per_host: int = 0, user_agent: str = "",
                        use_sitemaps: bool = False, every: str | int | None = None,
                        cron: str | None = None, host_delay_ms: int = 0, host_concurrency: int = 0,
                        priority: int = 0, extract: ExtractionRules | None = None, render: str = "never",
                        screenshots: bool = False) -> CrawlRequest:
    """Validate everything; raises :class:`InvalidURLError` or ValueError with a one-line reason.
    ``render`` is ``never``, ``always`` or ``auto`` (:mod:`crawl_platform.render`); whether this
    platform may and can render is :func:`render_refusal`'s question.
    ``every`` (``6h``, or seconds) or ``cron`` make the crawl recurring (:mod:`.schedules`);
    ``extract`` are its extraction rules (already validated: :func:`crawl_platform.extract.rules.parse_rules`)."""
    if not seeds:
        raise InvalidURLError("give at least one seed URL")
    canonical = [canonicalize(s) for s in seeds]
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if not 1 <= max_pages <= MAX_PAGES_LIMIT:
        raise ValueError(f"max-pages must be between 1 and {MAX_PAGES_LIMIT}, not {max_pages}")
    if not 0 <= max_depth <= MAX_DEPTH_LIMIT:
        raise ValueError(f"max-depth must be between 0 and {MAX_DEPTH_LIMIT}, not {max_depth}")
    if not 0 <= max_pages_per_host <= MAX_PAGES_LIMIT:
        raise ValueError(f"max-pages-per-host must be between 0 and {MAX_PAGES_LIMIT}, not {max_pages_per_host}")
    for name, value, high in (("host-delay-ms", host_delay_ms, MAX_HOST_DELAY_MS),
                              ("host-concurrency", host_concurrency, MAX_HOST_CONCURRENCY),
                              ("priority", priority, MAX_PRIORITY)):
        if not 0 <= value <= high:
            raise ValueError(f"{name} must be between 0 and {high}, not {value}")
    if render not in RENDER_MODES:
        raise ValueError(f"render must be one of {', '.join(RENDER_MODES)}, not {render!r}")
    if screenshots and render == "never":
        raise ValueError("screenshots are of rendered pages: give --render always or auto too")
    check_patterns(list(allow), "allow patterns")
    check_patterns(list(deny), "deny patterns")
    if any(ch in user_agent for ch in "\r\n"):
        raise ValueError("user agent must be one line")
    schedule = parse_schedule(every, cron) or Schedule()
    crawl_id = crawl_id or new_crawl_id(canonical[0])
    problem = crawl_id_problem(crawl_id)
    if problem is not None:
        raise ValueError(problem)
    if len(user_agent) > MAX_USER_AGENT_LENGTH:
        raise ValueError(f"user agent is longer than {MAX_USER_AGENT_LENGTH} characters")
    return CrawlRequest(crawl_id, tuple(dict.fromkeys(canonical)), max_pages, max_depth,
                        scope, time.time(), tuple(allow), tuple(deny), max_pages_per_host,
                        user_agent.strip(), use_sitemaps, schedule.every_seconds, schedule.cron,
                        host_delay_ms, host_concurrency, priority, extract.to_json() if extract is not None else "",
                        render, screenshots)  # type: ignore[arg-type]  # checked against RENDER_MODES above


def render_refusal(request: CrawlRequest, settings: Settings) -> str | None:
    """Why this platform refuses a request's rendering, in one line, or None: the operator forbids
    it (``CRAWL_RENDER_ALLOWED``), or this machine has no browser (the line says what to install)."""
    if request.render == "never":
        return None
    if not settings.render_allowed:
        return f"render {request.render}: this platform does not render pages (CRAWL_RENDER_ALLOWED=false)"
    from crawl_platform.render import rendering_problem  # noqa: PLC0415 - only rendering crawls look

    return rendering_problem(settings.browser_path, settings.tls_ca_file)


def submit_crawl(bus: Bus, request: CrawlRequest) -> None:
    """Put a validated crawl request on the seeds topic (raises BusError if the broker refuses)."""
    bus.ensure_topics()
    if not publish_crawl_request(bus, request):
        raise BusError(f"the broker did not confirm crawl {request.crawl_id}")


# What makes a registration impossible from here for now (the lake or the broker out of reach): the
# CLI, the seeds sensor and `up` leave the work to a later attempt or a run and say why in one line.
OUT_OF_REACH = (StoreUnavailableError, StoreBusyError, ExtensionError, BusError)


def user_crawl_id_problem(crawl_id: str) -> str | None:
    """Why a user may not name a crawl ``crawl_id`` (the CLI's ``--id``), or None: the crawl-id
    pattern, and ``@``, which only the passes of recurring crawls carry."""
    if "@" in crawl_id:
        return f"crawl id {crawl_id!r}: '@' is reserved for the passes of recurring crawls"
    return crawl_id_problem(crawl_id)


def registration_conflict(store: CrawlStore, bus: Bus, request: CrawlRequest) -> str | None:
    """Why the lake would refuse to register ``request`` (its id is registered with other options, or
    it is a pass not of its family), or None; None too when the lake is not there or not reachable
    now (the seeds sensor then refuses it as a dead letter)."""
    try:
        return Frontier(store, bus).admission.conflict(request) if store.exists() else None
    except OUT_OF_REACH:
        return None


def clamped_policies(request: CrawlRequest, settings: Settings) -> list[str]:
    """What the platform's limits change in a request's own politeness and priority, one phrase
    each (empty when nothing): the fetch step and the frontier sensor apply the limits, this only
    tells the user at submission."""
    notes = []
    if request.host_delay_ms and request.host_delay_ms < settings.min_host_delay_ms:
        notes.append(f"host delay {request.host_delay_ms} ms raised to CRAWL_MIN_HOST_DELAY_MS "
                     f"{settings.min_host_delay_ms} ms")
    if request.host_concurrency > settings.max_requests_per_host:
        notes.append(f"host concurrency {request.host_concurrency} cut to CRAWL_MAX_REQUESTS_PER_HOST "
                     f"{settings.max_requests_per_host}")
    if request.priority > settings.max_priority:
        notes.append(f"priority {request.priority} cut to CRAWL_MAX_PRIORITY {settings.max_priority}")
    return notes
