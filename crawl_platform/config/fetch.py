"""Settings of the fetcher and the parser: politeness, timeouts, retries, proxies, the SSRF guard,
and how pages are parsed.

Part of :class:`crawl_platform.config.Settings`; :mod:`crawl_platform.fetch` and
:mod:`crawl_platform.parse` read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings

from crawl_platform.parse import MAX_LINKS_PER_PAGE


class FetchSettings(BaseSettings):
    """How pages are fetched (politely) and parsed."""

    user_agent: str = Field(
        "crawl-platform/0.1 (+https://github.com/crawl-platform)",
        validation_alias=AliasChoices("CRAWL_USER_AGENT", "user_agent"),
        description="User-Agent sent, and matched against robots.txt groups; a crawl may set its own "
        "(`crawl --user-agent`).",
    )
    fetch_concurrency: int = Field(
        16, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_CONCURRENCY", "fetch_concurrency"),
        description="Requests in flight at once inside one run (fetch worker threads). A worker takes "
        "whichever host's turn comes first, so a host waiting out its delay holds no worker, and any number "
        "of hosts are fetched side by side. A new host's robots.txt is a turn of its own: its first page "
        "then waits out the gap in its queue, not in the worker.",
    )
    host_concurrency: int = Field(
        1, ge=1, le=64, validation_alias=AliasChoices("CRAWL_HOST_CONCURRENCY", "host_concurrency"),
        description="Requests one host may have in flight, their starts still `CRAWL_HOST_DELAY_MS` apart. "
        "Above 1 only while the host is healthy: a host that answers slowly, with 429/503, or asks a "
        "`Crawl-delay` gets one request at a time again.",
    )
    host_delay_ms: int = Field(
        250, ge=0, validation_alias=AliasChoices("CRAWL_HOST_DELAY_MS", "host_delay_ms"),
        description="Minimum gap between two requests to one host, from the end of one to the start of "
        "the next. A robots.txt `Crawl-delay` raises it, up to `CRAWL_MAX_CRAWL_DELAY`.",
    )
    min_host_delay_ms: int = Field(
        100, ge=0, validation_alias=AliasChoices("CRAWL_MIN_HOST_DELAY_MS", "min_host_delay_ms"),
        description="Floor of a crawl's own `--host-delay-ms`: a crawl asking for less gets this. Crawls "
        "asking for none use `CRAWL_HOST_DELAY_MS`.",
    )
    max_requests_per_host: int = Field(
        4, ge=1, le=64, validation_alias=AliasChoices("CRAWL_MAX_REQUESTS_PER_HOST", "max_requests_per_host"),
        description="Cap on a crawl's own `--host-concurrency` (requests in flight per host).",
    )
    max_priority: int = Field(
        10, ge=0, validation_alias=AliasChoices("CRAWL_MAX_PRIORITY", "max_priority"),
        description="Cap on a crawl's `--priority`; the frontier sensor clamps to it.",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, validation_alias=AliasChoices("CRAWL_CONNECT_TIMEOUT", "connect_timeout_s"),
        description="Seconds to connect.",
    )
    read_timeout_s: float = Field(
        15.0, gt=0, validation_alias=AliasChoices("CRAWL_READ_TIMEOUT", "read_timeout_s"),
        description="Seconds between bytes.",
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024, gt=0, validation_alias=AliasChoices("CRAWL_MAX_BODY_BYTES", "max_body_bytes"),
        description="Larger bodies are cut off while streaming and land as an error.",
    )
    max_redirects: int = Field(
        5, ge=0, validation_alias=AliasChoices("CRAWL_MAX_REDIRECTS", "max_redirects"),
        description="Redirect hops followed. Each hop is checked against robots.txt, the crawl's scope and "
        "the network guard.",
    )
    fetch_deadline_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("CRAWL_FETCH_DEADLINE", "fetch_deadline_s"),
        description="Total seconds for one response: connect, headers and body. A server that trickles "
        "bytes is cut off.",
    )
    content_types: list[str] = Field(
        default_factory=lambda: ["text/html", "application/xhtml+xml"],
        validation_alias=AliasChoices("CRAWL_CONTENT_TYPES", "content_types"),
        description="JSON list of media types whose body is downloaded and parsed. Other responses land "
        "with their status and type, `content_length` 0, and no document.",
    )
    fetch_max_attempts: int = Field(
        3, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_MAX_ATTEMPTS", "fetch_max_attempts"),
        description="Tries per URL, the first included, for connection errors, 429 and 5xx. The backoff is "
        "exponential with jitter and honours `Retry-After`.",
    )
    retry_backoff_s: float = Field(
        0.5, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_BACKOFF", "retry_backoff_s"),
        description="First retry backoff in seconds; it doubles each try, with jitter, capped at 10 s.",
    )
    retry_max_wait_s: float = Field(
        30.0, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_MAX_WAIT", "retry_max_wait_s"),
        description="Most seconds one URL waits in retries. A longer `Retry-After` fails the URL at once, "
        "with that error.",
    )
    max_crawl_delay_s: float = Field(
        10.0, ge=0, validation_alias=AliasChoices("CRAWL_MAX_CRAWL_DELAY", "max_crawl_delay_s"),
        description="Cap on a robots.txt `Crawl-delay`, in seconds.",
    )
    max_host_delay_ms: int = Field(
        30_000, ge=0, validation_alias=AliasChoices("CRAWL_MAX_HOST_DELAY_MS", "max_host_delay_ms"),
        description="Cap on the adaptive per-host delay. 429/503 answers double a host's delay and healthy "
        "answers halve it back toward `CRAWL_HOST_DELAY_MS`. The delay is kept in the `hosts` table, so "
        "every run uses it.",
    )
    slow_response_ms: int = Field(
        2_000, gt=0, validation_alias=AliasChoices("CRAWL_SLOW_RESPONSE_MS", "slow_response_ms"),
        description="After a slower response, its host waits as long again before the next request, which "
        "halves the load.",
    )
    proxies: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("CRAWL_PROXIES", "proxies"), repr=False,
        description="JSON list of proxy URLs, used in rotation. Write a password as `${ENV_VAR}` so it stays "
        "in the environment; credentials are never logged. A failing proxy sits out 60 s. A rendering "
        "browser's requests leave through them too (docs/rendering.md).",
    )
    obey_robots: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_OBEY_ROBOTS", "obey_robots"),
        description="Obey robots.txt (RFC 9309), cached per origin in the `hosts` table for 24 h. A 4xx "
        "means allow all. A 5xx or network error means the host is skipped and its URLs land as failures; "
        "it is tried again after 5 minutes. Rendered pages' own requests obey it too, each against its "
        "host's robots.txt.",
    )
    allowed_networks: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("CRAWL_ALLOWED_NETWORKS", "allowed_networks"),
        description='JSON list of CIDRs the fetcher may reach although they are loopback, private or '
        'link-local, e.g. `["127.0.0.0/8"]`. Empty: only public addresses (the SSRF guard). `up` allows '
        '`127.0.0.0/8` for its demo site.',
    )
    tls_ca_file: str = Field(
        "", validation_alias=AliasChoices("CRAWL_TLS_CA_FILE", "tls_ca_file"),
        description="PEM file of certificate authorities the crawler trusts for the sites it crawls (an "
        "intranet's private CA), besides its own: certifi's bundle for the fetcher, Chromium's roots for "
        "rendering. Both check every certificate against them; rendering with it needs `certutil` (Debian: "
        "`apt-get install libnss3-tools`). Empty: none.",
    )
    parser: Literal["selectolax", "lxml", "bs4"] = Field(
        "selectolax", validation_alias=AliasChoices("CRAWL_PARSER", "parser"),
        description="The title, text and links extractor: `selectolax` (lexbor's HTML5 parser, the fastest), "
        "`lxml` (libxml2) or `bs4` (BeautifulSoup); all give the same title, text and links on well-formed "
        "pages. A page nested more than 128 elements deep goes to lxml, since lexbor's parse time grows with "
        "the square of `<div>` nesting; an engine that fails on a page hands it to the next (selectolax, "
        "then lxml, then BeautifulSoup).",
    )
    max_links_per_page: int = Field(
        MAX_LINKS_PER_PAGE, ge=1, validation_alias=AliasChoices("CRAWL_MAX_LINKS_PER_PAGE", "max_links_per_page"),
        description="Most links a page keeps, in page order; the parser resolves no further, so a hostile "
        "page of 300,000 links costs no more to resolve, land and scope-check than one of 6,000 (its HTML "
        "is still parsed whole, within `CRAWL_MAX_BODY_BYTES`). A page cut there has "
        "`documents.links_truncated` true.",
    )
    main_content: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_MAIN_CONTENT", "main_content"),
        description="Extract each HTML page's main text, language and SimHash in the parse step "
        "(Resiliparse; its cost per page is in docs/benchmarks.md). `false` leaves `documents.main_text`, "
        "`language`, `simhash` and `extractor` NULL, and `near_duplicates` then finds exact copies only.",
    )
    parse_workers: int = Field(
        1, ge=0, le=16, validation_alias=AliasChoices("CRAWL_PARSE_WORKERS", "parse_workers"),
        description="Processes each fetch step starts to parse its pages while its threads go on fetching, "
        "so one batch uses two cores (the HTTP client and the parser both need Python's GIL). Once the "
        "fetch is over, the step's own process parses beside them, the chunks no worker has taken yet from "
        "the last one back. Pages go to the workers 16 at a time; a chunk whose worker died is parsed in "
        "the step. With the in-process executor a run starts its workers once and keeps them for every next "
        "batch it goes on to; on Celery each fetch step starts and ends its own. Each worker is a new "
        "interpreter that imports only the parser. `0`: parse in the step's own process after the fetch.",
    )
    parse_workers_from: int = Field(
        200, ge=0, validation_alias=AliasChoices("CRAWL_PARSE_WORKERS_FROM", "parse_workers_from"),
        description="Pages a fetch step must have before it starts parse workers: a smaller one (a "
        "crawl's seeds) is parsed in the step, unless its run's workers are up already. Starting one "
        "costs more CPU than parsing a couple of hundred pages. 0: start them for any step.",
    )

    @field_validator("tls_ca_file")
    @classmethod
    def _pem_certificates(cls, value: str) -> str:
        """A CA file is read where the crawler starts, so a wrong path fails at once, in one line."""
        if not value:
            return value
        try:
            text = Path(value).read_text(encoding="ascii", errors="replace")
        except OSError as err:
            raise ValueError(f"cannot read it: {err.strerror or err}") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise ValueError("holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        return value
