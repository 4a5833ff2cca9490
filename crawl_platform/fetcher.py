"""Fetches a batch of URLs politely: one worker per host, hosts in parallel.

Input is the list of URLs of one crawl batch; output is one :class:`FetchResult` per URL, never
an exception: failures become results with ``error`` set so they land as rows. Per host the
requests run one at a time, at least ``host_delay_s`` apart (or the robots.txt Crawl-delay, up
to a cap), on one pooled keep-alive session. Redirects are followed by hand so every hop is
checked against robots and the network guard.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import requests

from crawl_platform.config import Settings
from crawl_platform.robots import RobotsCache
from crawl_platform.urls import InvalidURLError, canonicalize, host_of

MAX_CRAWL_DELAY_S = 10.0
_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True)
class FetchResult:
    """Outcome of fetching one URL (after redirects)."""

    url: str
    final_url: str
    status: int | None
    content_type: str | None
    body: bytes
    error: str | None
    fetched_at: datetime
    elapsed_ms: float
    disallowed: bool = False

    @property
    def is_html(self) -> bool:
        return self.status is not None and "html" in (self.content_type or "")


class BlockedAddressError(Exception):
    """The URL's host resolves to an address the network guard refuses."""


class Fetcher:
    """HTTP client of the crawl; thread-safe, one instance per run."""

    def __init__(
        self,
        user_agent: str,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 15.0,
        max_body_bytes: int = 10 * 1024 * 1024,
        max_redirects: int = 5,
        host_delay_s: float = 0.25,
        concurrency: int = 16,
        obey_robots: bool = True,
        allow_private_networks: bool = False,
    ) -> None:
        self.user_agent = user_agent
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.max_body_bytes = max_body_bytes
        self.max_redirects = max_redirects
        self.host_delay_s = host_delay_s
        self.concurrency = concurrency
        self.obey_robots = obey_robots
        self.allow_private_networks = allow_private_networks
        self.robots = RobotsCache(self._fetch_robots)
        self._local = threading.local()
        self._last_request: dict[str, float] = {}
        self._delay_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Fetcher:
        return cls(
            user_agent=settings.user_agent,
            connect_timeout_s=settings.connect_timeout_s,
            read_timeout_s=settings.read_timeout_s,
            max_body_bytes=settings.max_body_bytes,
            max_redirects=settings.max_redirects,
            host_delay_s=settings.host_delay_ms / 1000.0,
            concurrency=settings.fetch_concurrency,
            obey_robots=settings.obey_robots,
            allow_private_networks=settings.allow_private_networks,
        )

    def fetch_all(self, urls: Iterable[str]) -> dict[str, FetchResult]:
        """Fetch every URL once (duplicates collapse); returns results keyed by URL."""
        by_host: dict[str, list[str]] = defaultdict(list)
        for url in dict.fromkeys(urls):
            by_host[host_of(url)].append(url)
        results: dict[str, FetchResult] = {}
        workers = max(1, min(self.concurrency, len(by_host)))
        with ThreadPoolExecutor(workers, thread_name_prefix="fetch") as pool:
            for host_results in pool.map(self._fetch_host, by_host.values()):
                results.update((r.url, r) for r in host_results)
        return results

    def fetch(self, url: str) -> FetchResult:
        """Fetch one URL, following redirects; never raises."""
        started = time.monotonic()
        current = url
        try:
            for _hop in range(self.max_redirects + 1):
                self._guard(current)
                if self.obey_robots:
                    refusal = self._robots_refusal(current)
                    if refusal:
                        return self._result(url, current, started, disallowed=True, error=refusal)
                self._wait_turn(urlsplit(current).scheme, host_of(current))
                status, ctype, body, location = self._get(current)
                if status in _REDIRECTS and location:
                    current = canonicalize(urljoin(current, location))
                    continue
                return self._result(url, current, started, status=status, content_type=ctype, body=body)
            return self._result(url, current, started, error=f"more than {self.max_redirects} redirects")
        except BlockedAddressError as err:
            return self._result(url, current, started, error=f"blocked address: {err}")
        except InvalidURLError as err:
            return self._result(url, current, started, error=f"bad redirect: {err}")
        except requests.RequestException as err:
            return self._result(url, current, started, error=f"{type(err).__name__}: {err}"[:500])

    # --- internals ------------------------------------------------------------------------------
    def _fetch_host(self, urls: list[str]) -> list[FetchResult]:
        return [self.fetch(u) for u in urls]

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["User-Agent"] = self.user_agent
            session.trust_env = False  # never route crawl traffic through an ambient proxy
            self._local.session = session
        return session

    def _get(self, url: str) -> tuple[int, str | None, bytes, str | None]:
        with self._session().get(url, timeout=self.timeout, stream=True, allow_redirects=False) as resp:
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_content(64 * 1024):
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise requests.exceptions.ContentDecodingError(
                        f"body larger than {self.max_body_bytes} bytes"
                    )
                chunks.append(chunk)
            return resp.status_code, resp.headers.get("Content-Type"), b"".join(chunks), resp.headers.get(
                "Location"
            )

    def _fetch_robots(self, robots_url: str) -> tuple[int | None, bytes]:
        try:
            self._guard(robots_url)
            self._reserve_slot(host_of(robots_url), self.host_delay_s)
            resp = self._session().get(robots_url, timeout=self.timeout, allow_redirects=True)
            return resp.status_code, resp.content
        except (requests.RequestException, BlockedAddressError):
            return None, b""

    def _robots_refusal(self, url: str) -> str | None:
        """Why robots.txt forbids ``url``, or None when it may be fetched."""
        parts = urlsplit(url)
        policy = self.robots.policy(parts.scheme, parts.netloc)
        if policy.disallow_all:
            return "robots.txt unreachable (server error or network failure): host skipped until it answers"
        return None if policy.allows(url, self.user_agent) else "disallowed by robots.txt"

    def _wait_turn(self, scheme: str, host: str) -> None:
        """Sleep until ``host`` may get its next request (the gap counts from request start)."""
        delay = self.host_delay_s
        if self.obey_robots:
            crawl_delay = self.robots.policy(scheme, host).crawl_delay(self.user_agent)
            if crawl_delay is not None:
                delay = max(delay, min(crawl_delay, MAX_CRAWL_DELAY_S))
        self._reserve_slot(host, delay)

    def _reserve_slot(self, host: str, delay: float) -> None:
        with self._delay_lock:
            now = time.monotonic()
            start = max(now, self._last_request.get(host, 0.0) + delay)
            self._last_request[host] = start
        if start > now:
            time.sleep(start - now)

    def _guard(self, url: str) -> None:
        if self.allow_private_networks:
            return
        host = urlsplit(url).hostname or ""
        try:
            infos = socket.getaddrinfo(host, None)
        except socket.gaierror as err:
            raise requests.exceptions.ConnectionError(f"cannot resolve {host}: {err}") from None
        for info in infos:
            addr = ipaddress.ip_address(info[4][0])
            if not addr.is_global or addr.is_multicast:
                raise BlockedAddressError(f"{host} resolves to non-public address {addr}")

    def _result(self, url: str, final_url: str, started: float, *, status: int | None = None,
                content_type: str | None = None, body: bytes = b"", error: str | None = None,
                disallowed: bool = False) -> FetchResult:
        return FetchResult(
            url=url, final_url=final_url, status=status, content_type=content_type, body=body,
            error=error, fetched_at=datetime.now(UTC).replace(tzinfo=None),
            elapsed_ms=(time.monotonic() - started) * 1000.0, disallowed=disallowed,
        )
