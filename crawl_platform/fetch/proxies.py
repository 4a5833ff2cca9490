"""Outgoing proxies: rotation, benching the ones that fail, and keeping their credentials secret.

The operator lists proxy URLs (``CRAWL_PROXIES``); a password may be written as a reference to
an environment variable, ``http://crawler:${PROXY_PASSWORD}@proxy.example:3128``, so the secret
lives where secrets live and not in the settings. The fetcher asks :meth:`ProxyPool.pick` for a
proxy per request (round robin over the healthy ones), reports a proxy that failed with
:meth:`ProxyPool.failed` (it sits out ``cooldown_s``), and shows proxies only through
:func:`~crawl_platform.redaction.redact_passwords`, which also scrubs credentials from any error
text before it is stored or logged.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from crawl_platform.redaction import redact_passwords as redact

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ProxyConfigError(ValueError):
    """A proxy URL that cannot be used; the message never contains its credentials."""


def expand_credentials(proxy_url: str, environ: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` references with values from ``environ`` (raises for a missing one)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ProxyConfigError(f"proxy {redact(proxy_url)}: environment variable {name} is not set")
        return environ[name]

    return _ENV_REF.sub(value, proxy_url)


class ProxyPool:
    """Round-robin over proxies, skipping those benched after a failure; thread-safe."""

    def __init__(self, proxy_urls: Iterable[str], cooldown_s: float = 60.0) -> None:
        self.proxies: tuple[str, ...] = tuple(proxy_urls)
        for proxy in self.proxies:
            parts = urlsplit(proxy)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ProxyConfigError(f"proxy {redact(proxy)!r}: expected http(s)://[user:password@]host:port")
        self.cooldown_s = cooldown_s
        self._next = 0
        self._benched_until: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings_list(cls, proxy_urls: Iterable[str], environ: Mapping[str, str],
                           cooldown_s: float = 60.0) -> ProxyPool:
        return cls([expand_credentials(p, environ) for p in proxy_urls], cooldown_s)

    def __bool__(self) -> bool:
        return bool(self.proxies)

    def pick(self, exclude: Iterable[str] = ()) -> str | None:
        """The next healthy proxy not in ``exclude``; None when there is none (or no proxies at all).

        When every proxy is benched the one whose bench ends first is tried anyway, so a crawl
        whose proxies all hiccuped recovers instead of failing every URL.
        """
        excluded = set(exclude)
        with self._lock:
            candidates = [p for p in self.proxies if p not in excluded]
            if not candidates:
                return None
            now = time.monotonic()
            for _ in range(len(self.proxies)):
                proxy = self.proxies[self._next % len(self.proxies)]
                self._next += 1
                if proxy not in excluded and self._benched_until.get(proxy, 0.0) <= now:
                    return proxy
            return min(candidates, key=lambda p: self._benched_until.get(p, 0.0))

    def failed(self, proxy: str) -> None:
        """``proxy`` refused or dropped a connection: bench it for ``cooldown_s``."""
        with self._lock:
            self._benched_until[proxy] = time.monotonic() + self.cooldown_s

    def healthy(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            return [p for p in self.proxies if self._benched_until.get(p, 0.0) <= now]
