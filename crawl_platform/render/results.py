"""What the fetch step hands the render step, what the render step asks of the browsers, and what it hands landing.

:class:`RenderTerms` travel in a :class:`~crawl_platform.pipeline.shard.ShardResult` from the
fetch step (one per URL of a crawl that renders) to the render step (:mod:`.step`), which gives
back a :class:`ShardRendering`: one :class:`PageRendering` per page it decided on, and the parses
of the rendered pages; landing applies it to the shard and writes the renderings into ``pages``.
In between, the render step gives its browser pool (:mod:`.browsers`) one :class:`RenderJob` per
page and gets one :class:`Rendered` back: both the pool and each of its browsers
(:mod:`.browser_slot`) use them, so they live here rather than in either.
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
class RenderJob:
    """One page to render: its archived response, and how its crawl fetches."""

    url: str  # the page's URL (what the result is keyed by)
    final_url: str  # where its HTTP fetch ended: the URL the browser loads
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    user_agent: str
    screenshot: bool = False


@dataclass(frozen=True)
class Rendered:
    """What rendering one page gave: its DOM (None on failure, ``error`` says why), the requests
    the guard or robots.txt refused, a PNG screenshot if one was asked for, and the requests (or
    tunnels) its proxy saw."""

    url: str
    html: str | None
    error: str | None
    refused: tuple[str, ...] = ()
    screenshot: bytes | None = None
    seconds: float = 0.0
    requests: int = 0


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
