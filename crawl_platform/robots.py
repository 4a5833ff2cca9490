"""robots.txt rules per host, fetched once and cached with an expiry.

The fetcher asks :meth:`RobotsCache.policy` before each request; the parsing is Protego's
(Scrapy's RFC 9309 parser). Fetch outcomes follow the RFC: 4xx means no rules (allow all), 5xx or
a network error means disallow all until the entry expires and is fetched again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from protego import Protego

ROBOTS_MAX_BYTES = 512 * 1024
ROBOTS_TTL_S = 24 * 3600.0
ROBOTS_ERROR_TTL_S = 300.0


@dataclass(frozen=True)
class RobotsPolicy:
    """What one host's robots.txt allows our user agent."""

    rules: Protego | None
    disallow_all: bool
    expires_at: float

    def allows(self, url: str, user_agent: str) -> bool:
        if self.disallow_all:
            return False
        return self.rules is None or bool(self.rules.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        if self.rules is None:
            return None
        delay = self.rules.crawl_delay(user_agent)
        return float(delay) if delay is not None else None


# (status or None on network error, body) for a robots.txt URL.
RobotsFetch = Callable[[str], tuple[int | None, bytes]]


class RobotsCache:
    """Per-host robots policies, thread-safe; one fetch per host per expiry period."""

    def __init__(self, fetch: RobotsFetch, ttl_s: float = ROBOTS_TTL_S) -> None:
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._policies: dict[str, RobotsPolicy] = {}
        self._lock = threading.Lock()

    def policy(self, scheme: str, host: str) -> RobotsPolicy:
        """The policy for ``scheme://host``, fetching robots.txt when absent or expired."""
        key = f"{scheme}://{host}"
        with self._lock:
            cached = self._policies.get(key)
        if cached is not None and cached.expires_at > time.time():
            return cached
        policy = self._load(key + "/robots.txt")
        with self._lock:
            self._policies[key] = policy
        return policy

    def _load(self, robots_url: str) -> RobotsPolicy:
        status, body = self._fetch(robots_url)
        now = time.time()
        if status is None or status >= 500:
            return RobotsPolicy(None, True, now + ROBOTS_ERROR_TTL_S)
        if status >= 400:
            return RobotsPolicy(None, False, now + self._ttl_s)
        text = body[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace")
        return RobotsPolicy(Protego.parse(text), False, now + self._ttl_s)
