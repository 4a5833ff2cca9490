"""URL rules of the crawl: canonical form, seed validation and scope.

Everything that compares or stores a URL goes through :func:`canonicalize` first, so the
frontier, the ``pages`` table and the dedup logic agree on what "the same URL" means. The
parser hands raw hrefs here; the frontier asks :class:`CrawlScope` whether a link belongs to
the crawl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit, urlunsplit

import tldextract
from w3lib.url import canonicalize_url

from crawl_platform.config import Scope

MAX_URL_LENGTH = 2048
_HOST = re.compile(r"[a-z0-9_.-]+|[0-9a-f:.]+")  # DNS names (underscores occur in the wild) or IPv6
_DEFAULT_PORTS = {"http": 80, "https": 443}
# No network: the public-suffix list bundled with tldextract is used as is.
_SUFFIXES = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class InvalidURLError(ValueError):
    """A URL that cannot be crawled; ``str(err)`` is a one-line reason for the user."""


def canonicalize(url: str) -> str:
    """Return the canonical absolute form of ``url`` (raises :class:`InvalidURLError`).

    Lower-case scheme and host, default port dropped, fragment dropped, query sorted, path
    percent-encoding normalised, empty path becomes ``/``.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InvalidURLError(f"{url!r}: {err}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURLError(f"{url!r}: only http and https URLs can be crawled")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise InvalidURLError(f"{url!r}: no host")
    if not _HOST.fullmatch(host):
        try:
            host = host.encode("idna").decode("ascii")  # internationalised names -> punycode
        except UnicodeError:
            raise InvalidURLError(f"{url!r}: invalid host name {host!r}") from None
        if not _HOST.fullmatch(host):
            raise InvalidURLError(f"{url!r}: invalid host name {host!r}")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURLError(f"{url[:80]!r}...: longer than {MAX_URL_LENGTH} characters")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    rebuilt = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    return canonicalize_url(rebuilt, keep_fragments=False)


def resolve_link(base_url: str, href: str) -> str | None:
    """Resolve ``href`` found on ``base_url`` to a canonical URL, or None when it is not crawlable."""
    href = href.strip()
    if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
        return None
    try:
        return canonicalize(urljoin(base_url, href))
    except (InvalidURLError, ValueError):
        return None


def host_of(url: str) -> str:
    """Host (with non-default port) of a canonical URL: the unit of politeness and partitioning."""
    return urlsplit(url).netloc


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """Registered domain of a host (``a.b.example.co.uk`` -> ``example.co.uk``); IPs map to themselves."""
    hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    extracted = _SUFFIXES(hostname)
    return extracted.top_domain_under_public_suffix or hostname


@dataclass(frozen=True)
class CrawlScope:
    """Which discovered URLs belong to a crawl, given its seeds."""

    scope: Scope
    seed_hosts: frozenset[str]

    @classmethod
    def for_seeds(cls, scope: Scope, seeds: list[str]) -> CrawlScope:
        return cls(scope, frozenset(host_of(s) for s in seeds))

    def admits(self, url: str) -> bool:
        """True when ``url`` (canonical) is inside the crawl's scope."""
        if self.scope == "any":
            return True
        host = host_of(url)
        if self.scope == "host":
            return host in self.seed_hosts
        domain = registered_domain(host)
        return any(registered_domain(seed) == domain for seed in self.seed_hosts)
