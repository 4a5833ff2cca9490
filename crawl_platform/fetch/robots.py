"""robots.txt rules per host (RFC 9309): fetched once, cached with an expiry, shared across runs.

The fetcher asks :meth:`RobotsCache.policy` before each request, including every redirect hop.
Reading the body into groups and matching are :mod:`.robots_rules`' (Protego matches: longest
match wins, ``*`` and ``$`` wildcards, with the work per URL bounded); the group is the one of
the user agent's *product token*, matched exactly as the RFC says (``crawl-platform`` in
``crawl-platform/0.1 (+https://...)``), never a word of the comment. No body makes a question
raise. What a fetch outcome means, per the RFC:

- 2xx: the rules (the first ``ROBOTS_MAX_BYTES``; :func:`fetch_robots_txt` stops reading there);
- redirects are followed (up to 5 hops, each through the network guard); more than that, or any
  4xx: no rules;
- 5xx, 429 or a network error: disallow everything until the entry expires (``error_ttl_s``,
  short) and robots.txt is fetched again.

Entries live ``ttl_s`` (at most 24 h). Runs share them through the ``hosts`` table: a batch
primes the cache from its hosts' rows (:meth:`RobotsCache.prime`) and writes back what it
fetched (:meth:`RobotsCache.fetched_records`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin

from crawl_platform.fetch.politeness import HostPacer, origin_of
from crawl_platform.fetch.robots_rules import RobotsRules
from crawl_platform.fetch.transport import REDIRECT_STATUSES, Transport, TransportError
from crawl_platform.store.hosts import HostRecord
from crawl_platform.urls import InvalidURLError, canonicalize

ROBOTS_MAX_BYTES = 512 * 1024
ROBOTS_TTL_S = 24 * 3600.0
ROBOTS_ERROR_TTL_S = 300.0
ROBOTS_MAX_REDIRECTS = 5
_PRODUCT = re.compile(r"[A-Za-z0-9_-]+")


def robots_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched against: ``Foo-Bot/2.1 (...)`` -> ``foo-bot``."""
    match = _PRODUCT.match(user_agent.strip())
    return match.group(0).lower() if match else "*"


@dataclass(frozen=True)
class RobotsPolicy:
    """What one host's robots.txt says; ``expires_at`` is a ``time.time()`` value."""

    rules: RobotsRules | None
    disallow_all: bool
    expires_at: float

    def allows(self, url: str, user_agent: str) -> bool:
        if self.disallow_all:
            return False
        return self.rules is None or self.rules.allows(url, robots_token(user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        return self.rules.crawl_delay(robots_token(user_agent)) if self.rules is not None else None

    @property
    def sitemaps(self) -> list[str]:
        return list(self.rules.sitemaps) if self.rules is not None else []


def policy_from(status: int | None, body: str, fetched_at: float, ttl_s: float,
                error_ttl_s: float) -> RobotsPolicy:
    """The policy a robots.txt fetch outcome stands for (status None: network error)."""
    if status is None or status >= 500 or status == 429:
        return RobotsPolicy(None, True, fetched_at + error_ttl_s)
    if not 200 <= status < 300:
        return RobotsPolicy(None, False, fetched_at + ttl_s)  # 3xx left over, 4xx: no rules
    return RobotsPolicy(RobotsRules(body[:ROBOTS_MAX_BYTES]), False, fetched_at + ttl_s)


# (status or None on network error, body) for a robots.txt URL.
RobotsFetch = Callable[[str], tuple[int | None, bytes]]


def fetch_robots_txt(transport: Transport, pacer: HostPacer, robots_url: str,
                     user_agent: str) -> tuple[int | None, bytes]:
    """GET robots.txt politely (``pacer``), following up to 5 redirects and reading at most
    ``ROBOTS_MAX_BYTES``: (status, body), or (None, b"") on a network error. A refused address
    raises :class:`~crawl_platform.fetch.netguard.BlockedAddressError`, so the page reports the
    network guard rather than robots.txt."""
    url = robots_url
    headers = {"User-Agent": user_agent, "Accept": "text/plain,*/*;q=0.5"}
    try:
        for _hop in range(ROBOTS_MAX_REDIRECTS + 1):
            with pacer.turn(origin_of(url)):
                resp = transport.get(url, headers, body_cap=ROBOTS_MAX_BYTES, truncate=True)
            location = resp.headers.get("Location")
            if resp.status not in REDIRECT_STATUSES or not location:
                return resp.status, resp.body
            url = canonicalize(urljoin(url, location))
        return resp.status, b""  # too many redirects: the RFC lets us treat it as unavailable
    except (TransportError, InvalidURLError):
        return None, b""


@dataclass(frozen=True)
class _Entry:
    policy: RobotsPolicy
    status: int | None
    body: str
    fetched_at: float


class RobotsCache:
    """Per-origin robots policies, thread-safe; one fetch per origin per expiry period."""

    def __init__(self, fetch: RobotsFetch, ttl_s: float = ROBOTS_TTL_S,
                 error_ttl_s: float = ROBOTS_ERROR_TTL_S) -> None:
        self._fetch = fetch
        self.ttl_s = min(ttl_s, ROBOTS_TTL_S)
        self.error_ttl_s = error_ttl_s
        self._entries: dict[str, _Entry] = {}
        self._fetched: set[str] = set()
        self._lock = threading.Lock()
        self._origin_locks: dict[str, threading.Lock] = {}

    def policy(self, origin: str) -> RobotsPolicy:
        """The policy for ``origin`` (``scheme://host[:port]``), fetching robots.txt when absent or expired."""
        entry = self._fresh(origin)
        if entry is not None:
            return entry.policy
        with self._lock:
            origin_lock = self._origin_locks.setdefault(origin, threading.Lock())
        with origin_lock:  # one fetch per origin even when several workers ask at once
            entry = self._fresh(origin)
            if entry is None:
                status, raw = self._fetch(origin + "/robots.txt")
                body = raw[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace") if status is not None else ""
                entry = self._store(origin, status, body, time.time())
                with self._lock:
                    self._fetched.add(origin)
            return entry.policy

    def known(self, origin: str) -> bool:
        """Whether :meth:`policy` would answer for ``origin`` without fetching robots.txt."""
        return self._fresh(origin) is not None

    def prime(self, record: HostRecord) -> None:
        """Use a robots.txt an earlier run fetched (``hosts`` row), unless it has expired."""
        if record.robots_fetched_at is None:
            return
        fetched_at = record.robots_fetched_at.replace(tzinfo=UTC).timestamp()
        policy = policy_from(record.robots_status, record.robots_body or "", fetched_at, self.ttl_s,
                             self.error_ttl_s)
        if policy.expires_at > time.time():
            with self._lock:
                self._entries.setdefault(
                    record.origin, _Entry(policy, record.robots_status, record.robots_body or "", fetched_at)
                )

    def fetched_records(self) -> list[HostRecord]:
        """The robots.txt files fetched by this cache (not primed ones), as ``hosts`` rows."""
        with self._lock:
            entries = {o: self._entries[o] for o in self._fetched}
        return [
            HostRecord(origin, e.status, e.body,
                       datetime.fromtimestamp(e.fetched_at, UTC).replace(tzinfo=None))
            for origin, e in sorted(entries.items())
        ]

    def _fresh(self, origin: str) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(origin)
        return entry if entry is not None and entry.policy.expires_at > time.time() else None

    def _store(self, origin: str, status: int | None, body: str, fetched_at: float) -> _Entry:
        entry = _Entry(policy_from(status, body, fetched_at, self.ttl_s, self.error_ttl_s), status, body,
                       fetched_at)
        with self._lock:
            self._entries[origin] = entry
        return entry
