"""URL rules of the crawl: canonical form, seed validation and scope.

Everything that compares or stores a URL goes through :func:`canonicalize` first, so the
frontier, the ``pages`` table and the dedup logic agree on what "the same URL" means. The
parser hands raw hrefs here; the frontier asks :class:`CrawlScope` whether a link belongs to
the crawl. A crawl's allow and deny patterns are RE2 patterns (:mod:`crawl_platform.patterns`), so
matching them costs time linear in the URL whatever the user wrote.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from crawl_platform.patterns import Pattern, PatternError, compile_pattern

if TYPE_CHECKING:  # types only: a parse worker, which resolves links, does not pay for importing settings
    import tldextract

    from crawl_platform.config import Scope

MAX_URL_LENGTH = 2048
MAX_QUERY_PARAMS = 16
MAX_PATH_SEGMENTS = 32
MAX_SEGMENT_REPEATS = 3
SESSION_PARAMS = frozenset({"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid",
                            "cfid", "cftoken", "zenid", "osscsid"})
_PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sessionid|sid)=[^/?#]*", re.I)
_HOST = re.compile(r"[a-z0-9_.-]+|[0-9a-f:.]+")  # DNS names (underscores occur in the wild) or IPv6
_DEFAULT_PORTS = {"http": 80, "https": 443}
_log = logging.getLogger(__name__)


class InvalidURLError(ValueError):
    """A URL that cannot be crawled; ``str(err)`` is a one-line reason for the user."""


CANONICAL_CACHE_SIZE = 32768
"""URLs whose canonical form a process remembers. Uncached, canonicalising (w3lib) is a large
share of the parse step's CPU (measured by ``benchmarks/link_resolution.py``), and a site's pages
link the same URLs over and over (navigation, related pages): about 10 MB at most."""


def canonicalize(url: str) -> str:
    """Return the canonical absolute form of ``url`` (raises :class:`InvalidURLError`).

    Lower-case scheme and host, default port dropped, fragment dropped, query sorted, path
    percent-encoding normalised, empty path becomes ``/``.
    """
    return _canonical(url.strip())


@lru_cache(maxsize=CANONICAL_CACHE_SIZE)
def _canonical(url: str) -> str:
    """:func:`canonicalize` of a stripped URL, remembered (a URL that raises is not)."""
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
    path = _PATH_SESSION.sub("", parts.path) or "/"
    rebuilt = urlunsplit((scheme, netloc, path, _strip_session_params(parts.query), ""))
    return canonicalize_url(rebuilt, keep_fragments=False)


def _strip_session_params(query: str) -> str:
    """Drop session-id parameters: the same page under a new id each visit is a classic trap."""
    if not query:
        return query
    kept = [pair for pair in query.split("&") if pair.split("=", 1)[0].lower() not in SESSION_PARAMS]
    return "&".join(kept)


def resolve_link(base_url: str, href: str) -> str | None:
    """Resolve ``href`` found on ``base_url`` to a canonical URL, or None when it is not crawlable."""
    href = href.strip()
    if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
        return None
    try:
        cut = href.find("#")
        if cut > 0:
            href = href[:cut]  # the canonical form has no fragment
        if href[0] == "/" and href[1:2] != "/" and "/." not in href:
            # An absolute path with no dot segments, most links of most sites: what urljoin would
            # give, without its two parses of the page's URL per link (a large share of the parse step).
            origin, canonical_origin = _origin(base_url)
            if canonical_origin and _PLAIN_PATH.fullmatch(href) and len(origin) + len(href) <= MAX_URL_LENGTH:
                # Nothing for canonicalize to change: the URL is the origin and the path as they are.
                return origin + href
            return canonicalize(origin + href)
        if _PLAIN_RELATIVE.fullmatch(href) and "/." not in href and "//" not in href:
            # A document-relative path with no dot segments: the base's folder and the path.
            folder = _folder(base_url)
            if folder is not None and len(folder) + len(href) <= MAX_URL_LENGTH:
                return folder + href
        return canonicalize(urljoin(base_url, href))
    except (InvalidURLError, ValueError):
        return None


_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,=:@/-]*")
"""A path canonicalize returns unchanged: no query, fragment, percent escape, path parameter (``;``)
or character to escape. Resolving the links found on a page would otherwise be a large share of a
parse worker's CPU, most of it canonicalising URLs of this form (measured by ``benchmarks/link_resolution.py``)."""
_PLAIN_RELATIVE = re.compile(r"[A-Za-z0-9_~!$&'()*+,=@-][A-Za-z0-9._~!$&'()*+,=@/-]*")
"""A document-relative path of :data:`_PLAIN_PATH`'s characters that cannot be read as a scheme
(no ``:``) or start a dot segment; with no ``/.`` or ``//`` in it either (urljoin drops empty
segments of a relative path), it resolves to the base's folder and itself."""


@lru_cache(maxsize=1024)
def _origin(url: str) -> tuple[str, bool]:
    """``scheme://netloc`` of ``url`` (the same page's links ask again and again), and whether it
    is in canonical form (so ``origin + plain path`` is canonical as it is)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    try:
        return origin, canonicalize(origin + "/") == origin + "/"
    except InvalidURLError:
        return origin, False


@lru_cache(maxsize=1024)
def _folder(url: str) -> str | None:
    """The canonical URL of ``url``'s folder (``http://host/a/`` of ``http://host/a/b.html?q``), to
    which a plain relative path is appended as it is; None when that is not a plain path on a
    canonical origin (then urljoin and canonicalize decide)."""
    origin, canonical_origin = _origin(url)
    path = urlsplit(url).path or "/"
    folder = path[: path.rfind("/") + 1]
    if not canonical_origin or not _PLAIN_PATH.fullmatch(folder) or "/." in folder or "//" in folder:
        return None
    return origin + folder


def host_of(url: str) -> str:
    """Host (with non-default port) of a canonical URL: the unit of politeness and partitioning."""
    return urlsplit(url).netloc


@cache
def _suffixes() -> tldextract.TLDExtract:
    """The public-suffix matcher, built at its first use: tldextract (and the ``requests`` it
    imports) is not needed to resolve links, all a parse worker does, so a worker never imports
    it. No network: the public-suffix list bundled with tldextract is used as is."""
    import tldextract  # noqa: PLC0415

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """Registered domain of a host (``a.b.example.co.uk`` -> ``example.co.uk``); IPs map to themselves."""
    hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    extracted = _suffixes()(hostname)
    if extracted.top_domain_under_public_suffix:
        return str(extracted.top_domain_under_public_suffix)
    labels = hostname.split(".")
    if len(labels) > 2 and not labels[-1].isdigit():
        # A suffix the public list does not know (.example, .internal): treat the last label as one.
        return ".".join(labels[-2:])
    return hostname


def trap_reason(url: str) -> str | None:
    """Why a canonical URL looks like a crawler trap, or None. Calendars and other infinite
    spaces that pass these checks are stopped by the crawl's depth and page caps."""
    parts = urlsplit(url)
    if parts.query and parts.query.count("&") + 1 > MAX_QUERY_PARAMS:
        return f"more than {MAX_QUERY_PARAMS} query parameters"
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) > MAX_PATH_SEGMENTS:
        return f"more than {MAX_PATH_SEGMENTS} path segments"
    for width in (1, 2, 3):
        run = 1
        for i in range(width, len(segments) - width + 1, width):
            run = run + 1 if segments[i:i + width] == segments[i - width:i] else 1
            if run >= MAX_SEGMENT_REPEATS:
                return f"path segments repeat: {'/'.join(segments[i - width:i])}"
    return None


@dataclass(frozen=True)
class CrawlScope:
    """Which discovered URLs belong to a crawl: seeds' host/domain, allow/deny patterns, traps.
    ``refused`` (set only by :meth:`from_row`) says why the crawl admits nothing at all."""

    scope: Scope
    seed_hosts: frozenset[str]
    allow: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()
    seed_domains: frozenset[str] = frozenset()  # registered domains of the seed hosts ("domain" scope)
    refused: str | None = None

    @classmethod
    def for_seeds(cls, scope: Scope, seeds: list[str], allow: Sequence[str] = (),
                  deny: Sequence[str] = ()) -> CrawlScope:
        """Raises :class:`~crawl_platform.patterns.PatternError` for a pattern RE2 cannot compile."""
        hosts = frozenset(host_of(s) for s in seeds)
        return cls(scope, hosts, tuple(compile_pattern(p) for p in allow), tuple(compile_pattern(p) for p in deny),
                   frozenset(registered_domain(h) for h in hosts) if scope == "domain" else frozenset())

    @classmethod
    def from_row(cls, scope: str, seeds: Sequence[str], allow: Sequence[str] | None,
                 deny: Sequence[str] | None, crawl_id: str = "") -> CrawlScope:
        """The scope of a stored crawl. Submission refuses a pattern RE2 cannot compile; one
        stored by another producer admits nothing for this crawl (dropping a deny pattern would
        widen it), says why in :meth:`rejection` and a warning, and leaves other crawls alone."""
        try:
            return cls.for_seeds(scope, list(seeds), allow or (), deny or ())  # type: ignore[arg-type]
        except PatternError as err:
            refused = f"the crawl admits no link: {err}"
            _log.warning("crawl %s: %s", crawl_id or "?", refused)
            return cls(scope, frozenset(host_of(s) for s in seeds), refused=refused)  # type: ignore[arg-type]

    def rejection(self, url: str) -> str | None:
        """Why ``url`` (canonical) is outside the crawl, or None when it belongs to it."""
        if self.refused is not None:
            return self.refused
        if not self._in_domain(url):
            return f"outside {self.scope} scope"
        if self.allow and not any(p.search(url) for p in self.allow):
            return "matches no allow pattern"
        if any(p.search(url) for p in self.deny):
            return "matches a deny pattern"
        return trap_reason(url)

    def admits(self, url: str) -> bool:
        return self.rejection(url) is None

    def _in_domain(self, url: str) -> bool:
        if self.scope == "any":
            return True
        host = host_of(url)
        if self.scope == "host":
            return host in self.seed_hosts
        return registered_domain(host) in self.seed_domains
