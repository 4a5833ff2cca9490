"""What the fetcher (:mod:`crawl_platform.fetch.fetcher`) takes and gives: one :class:`FetchRequest`
per URL in, one :class:`FetchResult` per URL out (with the redirects answered on the way)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from crawl_platform.fetch.transport import Exchange, media_type

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True)
class FetchRequest:
    """One URL to fetch, with what its crawl says about it."""

    url: str
    user_agent: str | None = None  # None: the fetcher's default
    in_scope: Callable[[str], bool] | None = None  # asked for every redirect target
    etag: str | None = None  # validators of the latest stored version: a conditional GET
    last_modified: str | None = None
    accept_any: bool = False  # read a body of any content type (sitemaps), not just the allow-list
    host_delay_s: float | None = None  # the crawl's own gap per host (None: the fetcher's), clamped
    host_concurrency: int = 0  # the crawl's own requests in flight per host (0: the fetcher's), clamped
    # FetchResult.content_hash of the latest stored version: a response with this hash is the page the lake
    # has already (its parse would land nothing), so it is not parsed again.
    known_hash: str | None = None
    # That version's number (0: the lake had none), and the lake snapshot both were read in (None:
    # not read): landing then reads only the versions committed since (store.pages.versions_since).
    known_version: int = 0
    known_as_of: int | None = None
    # The crawl's JavaScript rendering (crawl_platform.render): never, always or auto; whether to
    # archive a screenshot; and (auto) the extraction rules whose required fields decide it.
    render: str = "never"
    screenshots: bool = False
    extract_rules: str = ""
    # The crawls that want this URL, the batch's first first (its page lands under that crawl): a
    # fetch step leaves it unfetched once all of them are paused or cancelled
    # (crawl_platform.pipeline.control_watch). Empty: no crawl's control applies.
    crawl_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RedirectHop:
    """A redirect answered on the way to the final response: kept for the raw archive."""

    url: str
    status: int
    body: bytes  # what the redirect said (at most REDIRECT_BODY_BYTES of it)
    exchange: Exchange | None
    fetched_at: datetime


@dataclass(frozen=True)
class FetchResult:
    """Outcome of fetching one URL (after redirects).

    ``status`` None means there was no final response and ``error`` says why; an error with a
    status means the fetcher gave up on that response (retries exhausted). ``disallowed``
    results are never requested and never land. A 304 (``not_modified``) lands no new version.
    """

    url: str
    final_url: str
    status: int | None
    content_type: str | None
    body: bytes
    error: str | None
    fetched_at: datetime
    elapsed_ms: float
    disallowed: bool = False
    redirect_chain: tuple[str, ...] = ()  # every URL that answered with a redirect, in order
    etag: str | None = None
    last_modified: str | None = None
    attempts: int = 0  # requests sent for the final hop
    exchange: Exchange | None = None  # the final hop's request and response headers (the raw archive)
    hops: tuple[RedirectHop, ...] = ()  # the redirects answered before it, in order (the raw archive)

    @property
    def not_modified(self) -> bool:
        return self.status == 304

    @property
    def is_html(self) -> bool:
        """A page to parse: an HTML answer whose body was read."""
        if self.status is None or self.status == 304 or not self.body:
            return False
        media = media_type(self.content_type)
        if media is None:  # no Content-Type at all: sniff
            return self.body[:1024].lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
        return media in HTML_TYPES

    @functools.cached_property
    def content_hash(self) -> str:
        """sha256 of what the page *is* for versioning: its status and body, or the kind of failure
        (``pages.content_hash``; a URL gets a new version only when it differs from its latest).
        Computed once: the fetch step compares it with the latest version's, landing stores it."""
        digest = hashlib.sha256()
        if self.status is None:
            digest.update(b"error\n" + (self.error or "").split(":", 1)[0].encode())
        else:
            digest.update(f"{self.status}\n".encode())
            digest.update(self.body)
        return digest.hexdigest()

