"""Settings of the fetcher and the parser: politeness, timeouts, retries, proxies, the SSRF guard,
and how pages are parsed.

Part of :class:`crawl_platform.config.Settings`; :mod:`crawl_platform.fetch` and
:mod:`crawl_platform.parse` read them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings

from crawl_platform.parse import MAX_LINKS_PER_PAGE


class FetchSettings(BaseSettings):
    """How pages are fetched (politely) and parsed."""

    user_agent: str = Field(
        "crawl-platform/0.1 (+https://github.com/crawl-platform)",
        validation_alias=AliasChoices("CRAWL_USER_AGENT", "user_agent"),
    )
    fetch_concurrency: int = Field(
        16, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_CONCURRENCY", "fetch_concurrency"),
        description="Requests in flight at once inside one run (fetch worker threads). A worker takes "
        "whichever host's turn comes first, so a host waiting out its delay holds no worker.",
    )
    host_concurrency: int = Field(
        1, ge=1, le=64, validation_alias=AliasChoices("CRAWL_HOST_CONCURRENCY", "host_concurrency"),
        description="Requests one host may have in flight. Above 1 only while the host is healthy: a "
        "host that answers slowly, with 429/503 or asks a Crawl-delay gets one at a time again.",
    )
    host_delay_ms: int = Field(
        250, ge=0, validation_alias=AliasChoices("CRAWL_HOST_DELAY_MS", "host_delay_ms"),
        description="Minimum gap between two requests to the same host.",
    )
    min_host_delay_ms: int = Field(
        100, ge=0, validation_alias=AliasChoices("CRAWL_MIN_HOST_DELAY_MS", "min_host_delay_ms"),
        description="Floor of a crawl's own host delay (crawl --host-delay-ms): a crawl asking for less "
        "gets this. Crawls that ask for none use CRAWL_HOST_DELAY_MS.",
    )
    max_requests_per_host: int = Field(
        4, ge=1, le=64, validation_alias=AliasChoices("CRAWL_MAX_REQUESTS_PER_HOST", "max_requests_per_host"),
        description="Cap on a crawl's own requests in flight per host (crawl --host-concurrency).",
    )
    max_priority: int = Field(
        10, ge=0, validation_alias=AliasChoices("CRAWL_MAX_PRIORITY", "max_priority"),
        description="Cap on a crawl's priority (crawl --priority); the frontier sensor clamps to it.",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, validation_alias=AliasChoices("CRAWL_CONNECT_TIMEOUT", "connect_timeout_s")
    )
    read_timeout_s: float = Field(
        15.0, gt=0, validation_alias=AliasChoices("CRAWL_READ_TIMEOUT", "read_timeout_s")
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024, gt=0, validation_alias=AliasChoices("CRAWL_MAX_BODY_BYTES", "max_body_bytes")
    )
    max_redirects: int = Field(5, ge=0, validation_alias=AliasChoices("CRAWL_MAX_REDIRECTS", "max_redirects"))
    fetch_deadline_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("CRAWL_FETCH_DEADLINE", "fetch_deadline_s"),
        description="Total seconds for one response (connect, headers and body); a trickling server is cut off.",
    )
    content_types: list[str] = Field(
        default_factory=lambda: ["text/html", "application/xhtml+xml"],
        validation_alias=AliasChoices("CRAWL_CONTENT_TYPES", "content_types"),
        description="JSON list of media types whose body is downloaded and parsed; other responses land "
        "with their status and type but no body.",
    )
    fetch_max_attempts: int = Field(
        3, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_MAX_ATTEMPTS", "fetch_max_attempts"),
        description="Tries per URL (the first included) for connection errors, 429 and 5xx.",
    )
    retry_backoff_s: float = Field(
        0.5, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_BACKOFF", "retry_backoff_s"),
        description="First retry backoff; doubles each try, with jitter, capped at 10 s.",
    )
    retry_max_wait_s: float = Field(
        30.0, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_MAX_WAIT", "retry_max_wait_s"),
        description="Most seconds one URL waits in retries; a longer Retry-After fails it at once.",
    )
    max_crawl_delay_s: float = Field(
        10.0, ge=0, validation_alias=AliasChoices("CRAWL_MAX_CRAWL_DELAY", "max_crawl_delay_s"),
        description="Cap on a robots.txt Crawl-delay.",
    )
    max_host_delay_ms: int = Field(
        30_000, ge=0, validation_alias=AliasChoices("CRAWL_MAX_HOST_DELAY_MS", "max_host_delay_ms"),
        description="Cap on the adaptive per-host delay (raised by 429/503 and slow answers).",
    )
    slow_response_ms: int = Field(
        2_000, gt=0, validation_alias=AliasChoices("CRAWL_SLOW_RESPONSE_MS", "slow_response_ms"),
        description="After a slower response its host waits as long again before the next request.",
    )
    proxies: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("CRAWL_PROXIES", "proxies"), repr=False,
        description="JSON list of proxy URLs used in rotation; write a password as ${ENV_VAR} so it stays "
        "in the environment. A failing proxy sits out 60 s.",
    )
    obey_robots: bool = Field(True, validation_alias=AliasChoices("CRAWL_OBEY_ROBOTS", "obey_robots"))
    allowed_networks: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("CRAWL_ALLOWED_NETWORKS", "allowed_networks"),
        description='JSON list of CIDRs the fetcher may connect to although they are private, loopback '
        'or link-local, e.g. ["127.0.0.0/8"]. Empty: only public addresses (the SSRF guard).',
    )
    parser: Literal["selectolax", "lxml", "bs4"] = Field(
        "selectolax", validation_alias=AliasChoices("CRAWL_PARSER", "parser"),
        description="Link/text extractor: selectolax (lexbor, the fastest), lxml or BeautifulSoup; all give "
        "the same title, text and links on well-formed pages.",
    )
    max_links_per_page: int = Field(
        MAX_LINKS_PER_PAGE, ge=1, validation_alias=AliasChoices("CRAWL_MAX_LINKS_PER_PAGE", "max_links_per_page"),
        description="Most links kept per page, in page order (documents.links_truncated says a page had "
        "more); the parser stops reading links there.",
    )
    main_content: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_MAIN_CONTENT", "main_content"),
        description="Extract each page's main text, language and SimHash in the parse step (Resiliparse; "
        "false: documents.main_text and simhash stay NULL, and near_duplicates finds exact copies only).",
    )
    parse_workers: int = Field(
        1, ge=0, le=16, validation_alias=AliasChoices("CRAWL_PARSE_WORKERS", "parse_workers"),
        description="Processes a fetch step starts to parse its pages while its threads go on fetching "
        "(fetching and parsing then use two cores); once the fetch is over the step's process parses "
        "beside them. A run starts them once and keeps them for every next batch it goes on to. "
        "0: parse in the step's own process after the fetch.",
    )
    parse_workers_from: int = Field(
        200, ge=0, validation_alias=AliasChoices("CRAWL_PARSE_WORKERS_FROM", "parse_workers_from"),
        description="Pages a fetch step must have before it starts parse workers: a smaller one (a "
        "crawl's seeds) is parsed in the step, unless its run's workers are up already. Starting one "
        "costs about 0.6 CPU s, more than parsing 200 pages. 0: start them for any step.",
    )
