"""What the fetch step hands the render step, and what the render step hands landing.

:class:`RenderTerms` travel in a :class:`~crawl_platform.pipeline.shard.ShardResult` from the
fetch step (one per URL of a crawl that renders) to the render step (:mod:`.step`), which gives
back a :class:`ShardRendering`: one :class:`PageRendering` per page it decided on, and the parses
of the rendered pages; landing applies it to the shard and writes the renderings into ``pages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawl_platform.archive.writer import RecordPointer
from crawl_platform.parse.html import ParsedPage


@dataclass(frozen=True)
class RenderTerms:
    """How one URL's crawl renders: its mode, screenshots, User-Agent, gap per host and (auto)
    extraction rules."""

    mode: str  # always | auto
    user_agent: str
    host_delay_s: float | None = None  # the crawl's own gap (None: the platform's)
    screenshots: bool = False
    extract_rules: str = ""
    crawl_ids: tuple[str, ...] = ()  # the crawls that want the page (a pause or cancel of all of them holds it)


@dataclass
class RenderContext:
    """What a shard's render step needs beyond its fetch results: the terms of each URL to
    consider, the origins known to need rendering, and each origin's robots.txt body."""

    terms: dict[str, RenderTerms] = field(default_factory=dict)
    hosts_needing: set[str] = field(default_factory=set)
    robots: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PageRendering:
    """One page's rendering as ``pages`` records it (``rendered``, ``render_reason``,
    ``render_error``, ``render_refused``, ``render_warc_*``)."""

    rendered: bool
    reason: str
    error: str | None = None
    refused: tuple[str, ...] = ()
    pointer: RecordPointer | None = None  # the rendered DOM's WARC record


@dataclass
class ShardRendering:
    """What a render step gives for one shard, applied to the fetch step's shard by landing: the
    parses of the rendered DOMs (replacing the HTTP bodies'), each page's :class:`PageRendering`,
    the origins found to need rendering, and the seconds it took. Small: no body travels twice."""

    parsed: dict[str, ParsedPage] = field(default_factory=dict)
    rendering: dict[str, PageRendering] = field(default_factory=dict)
    hosts_needing: set[str] = field(default_factory=set)
    seconds: float = 0.0
    # Pages not rendered because every crawl that wanted them was paused or cancelled before their
    # turn: landing drops their fetch results too, so they land ``skipped`` (see ShardResult.held).
    held: list[str] = field(default_factory=list)
