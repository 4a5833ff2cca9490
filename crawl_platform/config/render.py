"""Settings of JavaScript rendering: whether crawls may ask for it, the browser, and its pool's limits.

Part of :class:`crawl_platform.config.Settings`; :mod:`crawl_platform.render` reads them. A crawl
asks for rendering with ``--render always|auto``; these say whether it may and how the browsers run.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings


class RenderSettings(BaseSettings):
    """How pages are rendered in a headless browser."""

    render_allowed: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_RENDER_ALLOWED", "render_allowed"),
        description="Whether crawls may ask for JavaScript rendering (`crawl --render always|auto`). False: "
        "such a crawl is refused at submission with one line, and a batch fetches its pages over HTTP only.",
    )
    browser_path: str = Field(
        "", validation_alias=AliasChoices("CRAWL_BROWSER_PATH", "browser_path"),
        description="The Chromium executable rendering starts. Empty: `chromium` on `PATH`, then "
        "`/usr/bin/chromium` (Debian's `chromium` package).",
    )
    render_browsers: int = Field(
        2, ge=1, le=32, validation_alias=AliasChoices("CRAWL_RENDER_BROWSERS", "render_browsers"),
        description="Browsers a render step runs side by side, each rendering one page at a time, so a "
        "browser that crashes or hangs fails only its page.",
    )
    render_pages_per_browser: int = Field(
        50, ge=1, validation_alias=AliasChoices("CRAWL_RENDER_PAGES_PER_BROWSER", "render_pages_per_browser"),
        description="Pages a browser renders before it is replaced by a fresh one.",
    )
    render_timeout_s: float = Field(
        20.0, gt=0, validation_alias=AliasChoices("CRAWL_RENDER_TIMEOUT_S", "render_timeout_s"),
        description="Seconds one page may take to load and settle (no request in flight for half a second, "
        "then its main thread idle). "
        "A page over it fails with its reason, and its browser is replaced.",
    )
    render_max_memory_mb: int = Field(
        1024, ge=64, validation_alias=AliasChoices("CRAWL_RENDER_MAX_MEMORY_MB", "render_max_memory_mb"),
        description="Memory a browser may hold after a page (resident and not shared, over all of its "
        "processes); above it the browser is replaced. Each page's JavaScript heap is also capped at half of it.",
    )
