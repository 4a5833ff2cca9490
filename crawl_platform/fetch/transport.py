"""One HTTP exchange, bounded in every direction: the layer under :mod:`crawl_platform.fetch.fetcher`.

:meth:`Transport.get` sends one GET (no redirects, no retries: the fetcher decides those) and
returns a :class:`Response` or raises a :class:`TransportError`; a :class:`ConnectionFailedError`
is one that trying again later could cure. What it bounds:

- **where it connects**: direct connections go through urllib3 connection classes that resolve
  the host once, connect only to an address :class:`~crawl_platform.fetch.netguard.NetworkGuard`
  accepts and check the connected socket's peer again; through a proxy, the target's addresses
  are checked before the request (the proxy resolves it, so that is all we can see);
- **time**: connect and read timeouts per socket operation, plus a total deadline per
  response enforced by one watchdog thread that shuts the socket down, so a server trickling a
  byte a second (in the headers or the body) is cut off on time;
- **size**: the decoded body is counted while streaming and cut off at ``max_body_bytes``, so an
  endless body or a gzip bomb is never held whole; a 2xx body of a type the caller does not
  accept is not read at all.

One pooled keep-alive session serves every fetch worker (urllib3's connection pools are
thread-safe), so a host's open connection serves whichever worker asks that host next.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError, ReadTimeoutError
from urllib3.util import connection as urllib3_connection

from crawl_platform.fetch.deadlines import WATCHDOG, Deadline, ExpiredDeadlineError
from crawl_platform.fetch.netguard import BlockedAddressError, NetworkGuard
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.redaction import redact_passwords as redact

log = logging.getLogger(__name__)

CHUNK_BYTES = 64 * 1024
REDIRECT_BODY_BYTES = 64 * 1024  # enough of a 3xx body to keep the connection reusable
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})  # the 3xx a caller follows to Location


class TransportError(Exception):
    """No usable response; ``str(err)`` is the one-line error that lands in ``pages.error``."""


class ConnectionFailedError(TransportError):
    """Could not connect, or the connection broke: worth another attempt later."""


class ProxyFailedError(ConnectionFailedError):
    """The proxy itself refused or dropped us: try the next proxy."""


class DeadlineExceededError(TransportError):
    """The response took longer than the total deadline."""


class BodyTooLargeError(TransportError):
    """The (decoded) body grew past the cap while streaming."""


@dataclass(frozen=True)
class Exchange:
    """The HTTP messages of one GET as sent and received, for the raw archive (the body is the
    response's). Headers in wire order with duplicates kept; built from what urllib3 already parsed."""

    request_line: str  # "GET /path?query HTTP/1.1"
    request_headers: tuple[tuple[str, str], ...]
    status_line: str  # "HTTP/1.1 200 OK"
    response_headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Response:
    """What came back for one GET."""

    url: str
    status: int
    headers: Mapping[str, str]  # case-insensitive
    body: bytes  # empty when the body was not read (a 2xx of a type not accepted)
    latency_s: float  # request sent -> headers received: the server's responsiveness
    exchange: Exchange | None = None

    @property
    def content_type(self) -> str | None:
        return self.headers.get("Content-Type")


def media_type(content_type: str | None) -> str | None:
    """``text/html; charset=utf-8`` -> ``text/html``; None when absent or empty."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media or None


# --- guarded connections --------------------------------------------------------------------------

class _GuardedConnectionMixin:
    """Resolves once, connects only to an address the guard accepts, and re-checks the peer."""

    guard: NetworkGuard
    # Provided by urllib3's HTTPConnection:
    host: str
    port: int
    timeout: Any
    source_address: tuple[str, int] | None
    socket_options: Any
    _dns_host: str

    def _new_conn(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self._dns_host, self.port, type=socket.SOCK_STREAM)
        except socket.gaierror as err:
            raise NameResolutionError(self.host, self, err) from err  # type: ignore[arg-type]
        refused: BlockedAddressError | None = None
        failure: OSError | None = None
        for *_, sockaddr in infos:
            address = str(sockaddr[0])
            try:
                self.guard.check(self.host, address)
            except BlockedAddressError as err:
                refused = err
                continue
            try:
                sock = urllib3_connection.create_connection(
                    (address, self.port), self.timeout, source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as err:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})"
                ) from err
            except OSError as err:
                failure = err
                continue
            peer = str(sock.getpeername()[0])
            try:
                self.guard.check(self.host, peer)
            except BlockedAddressError:
                sock.close()
                raise
            return sock
        if failure is None and refused is not None:
            raise refused
        raise NewConnectionError(self, f"Failed to establish a new connection: {failure}")  # type: ignore[arg-type]

    def request(self, *args: Any, **kwargs: Any) -> None:
        WATCHDOG.attach(self)  # type: ignore[arg-type]
        super().request(*args, **kwargs)  # type: ignore[misc]


class _GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


class _WatchedConnectionMixin:
    """Proxy connections: not guarded (the operator chose the proxy) but still under the deadline."""

    def request(self, *args: Any, **kwargs: Any) -> None:
        WATCHDOG.attach(self)  # type: ignore[arg-type]
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_WatchedConnectionMixin, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_WatchedConnectionMixin, HTTPSConnection):
    pass


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose direct connections obey ``guard`` and all connections the deadline."""

    def __init__(self, guard: NetworkGuard, pool_maxsize: int = 4, extra_ca_pem: str = "") -> None:
        self._guard = guard
        # Certificates to trust besides certifi's bundle (which requests names per request): urllib3
        # loads both into each connection's context. urllib3 drops it for plain-HTTP pools.
        self._tls = {"ca_cert_data": extra_ca_pem} if extra_ca_pem else {}
        super().__init__(pool_connections=256, pool_maxsize=pool_maxsize, max_retries=0)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **self._tls, **pool_kwargs)
        bound = {"guard": self._guard}
        http_conn = type("GuardedHTTPConnection", (_GuardedHTTPConnection,), bound)
        https_conn = type("GuardedHTTPSConnection", (_GuardedHTTPSConnection,), bound)
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
            "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **self._tls, **proxy_kwargs)
        manager.pool_classes_by_scheme = {
            "http": type("WatchedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": _WatchedHTTPConnection}),
            "https": type("WatchedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": _WatchedHTTPSConnection}),
        }
        return manager


def _any(_media: str | None) -> bool:
    return True


# --- the transport --------------------------------------------------------------------------------

class Transport:
    """Sends single bounded GETs, directly or through ``proxies``; thread-safe (one shared session)."""

    def __init__(self, guard: NetworkGuard, connect_timeout_s: float = 5.0, read_timeout_s: float = 15.0,
                 deadline_s: float = 30.0, max_body_bytes: int = 10 * 1024 * 1024,
                 proxies: ProxyPool | None = None, connections_per_host: int = 4, ca_file: str = "") -> None:
        """``ca_file``: a PEM file of certificate authorities trusted besides certifi's (CRAWL_TLS_CA_FILE)."""
        self.guard = guard
        self.extra_ca_pem = Path(ca_file).read_text(encoding="ascii") if ca_file else ""
        # Keep-alive connections kept per host. Beyond it urllib3 opens extra ones and drops them
        # with a warning, so it must cover a host's requests in flight (CRAWL_HOST_CONCURRENCY).
        self.connections_per_host = connections_per_host
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.deadline_s = deadline_s
        self.max_body_bytes = max_body_bytes
        self.proxies = proxies or ProxyPool(())
        self._session_lock = threading.Lock()
        self._shared: requests.Session | None = None

    def get(self, url: str, headers: Mapping[str, str], *, accepts: Callable[[str | None], bool] = _any,
            body_cap: int | None = None, truncate: bool = False) -> Response:
        """GET ``url`` once. ``accepts(media_type)`` decides whether a 2xx body is read at all; a
        body over ``body_cap`` (default ``max_body_bytes``) raises :class:`BodyTooLargeError`, or with
        ``truncate`` is cut there (robots.txt: parse what fits).

        With proxies, the request goes through the next healthy one; a proxy that fails (or
        answers 407) is benched and the next one tried, and only when all have failed does this
        raise :class:`ConnectionFailedError`, which the fetcher retries like any connection failure.
        """
        if not self.proxies:
            return self._get(url, headers, None, accepts, body_cap, truncate)
        tried: list[str] = []
        reason = "no proxy configured"
        while (proxy := self.proxies.pick(exclude=tried)) is not None:
            tried.append(proxy)
            try:
                resp = self._get(url, headers, proxy, accepts, body_cap, truncate)
            except ProxyFailedError as err:
                reason = str(err)
            else:
                if resp.status != 407:
                    return resp
                reason = "407 Proxy Authentication Required"
            self.proxies.failed(proxy)
            log.warning("proxy %s failed (%s); benched for %.0fs", redact(proxy), redact(reason),
                        self.proxies.cooldown_s)
        raise ConnectionFailedError(redact(f"ProxyError: all {len(tried)} proxies failed, the last with: {reason}"))

    def _get(self, url: str, headers: Mapping[str, str], proxy: str | None,
             accepts: Callable[[str | None], bool], body_cap: int | None, truncate: bool) -> Response:
        if proxy is not None:
            self._check_target(url)
        proxies = {"http": proxy, "https": proxy} if proxy else None
        with WATCHDOG.limit(self.deadline_s) as deadline:
            try:
                resp = self._session().get(url, headers=dict(headers), timeout=self.timeout, stream=True,
                                           allow_redirects=False, proxies=proxies)
            except requests.RequestException as err:
                raise _classify(err, deadline) from None
            except ExpiredDeadlineError:
                raise DeadlineExceededError(deadline.message) from None
            except ValueError as err:  # requests reads a redirect's Location even when following none
                raise TransportError(redact(f"bad redirect: {' '.join(str(err).split())}")[:500]) from None
            with resp:
                latency = resp.elapsed.total_seconds()
                status = resp.status_code
                exchange = _exchange(resp)
                if 200 <= status < 300 and not accepts(media_type(resp.headers.get("Content-Type"))):
                    return Response(url, status, resp.headers, b"", latency, exchange)
                try:
                    if 300 <= status < 400:
                        body = _read(resp, REDIRECT_BODY_BYTES, strict=False)
                    else:
                        body = _read(resp, body_cap or self.max_body_bytes, strict=not truncate)
                except requests.RequestException as err:
                    raise _classify(err, deadline) from None
                if deadline.expired:  # the last bytes raced the watchdog: still too late
                    raise DeadlineExceededError(deadline.message)
                return Response(url, status, resp.headers, body, latency, exchange)

    def _check_target(self, url: str) -> None:
        """Through a proxy we cannot see the connected address: check what the name resolves to."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            infos = socket.getaddrinfo(host, parts.port or 80, type=socket.SOCK_STREAM)
        except socket.gaierror as err:
            raise ConnectionFailedError(f"NameResolutionError: cannot resolve {host}: {err}") from None
        for *_, sockaddr in infos:
            self.guard.check(host, str(sockaddr[0]))

    def close(self) -> None:
        """Close the keep-alive connections (a later request opens new ones)."""
        with self._session_lock:
            session, self._shared = self._shared, None
        if session is not None:
            session.close()

    def _session(self) -> requests.Session:
        with self._session_lock:
            if self._shared is None:
                session = requests.Session()
                session.trust_env = False  # never route crawl traffic through an ambient proxy or .netrc
                adapter = GuardedAdapter(self.guard, pool_maxsize=self.connections_per_host,
                                         extra_ca_pem=self.extra_ca_pem)
                session.mount("http://", adapter)
                session.mount("https://", adapter)
                self._shared = session
            return self._shared


def _exchange(resp: requests.Response) -> Exchange:
    """The request as sent (http.client adds Host itself) and the status line and headers received."""
    sent = resp.request
    parts = urlsplit(resp.url)
    version = getattr(resp.raw, "version", 11) or 11
    protocol = f"HTTP/{version // 10}.{version % 10}"
    request_headers = (("Host", parts.netloc), *((k, str(v)) for k, v in sent.headers.items()))
    return Exchange(f"{sent.method} {sent.path_url} HTTP/1.1", request_headers,  # http.client always sends 1.1
                    f"{protocol} {resp.status_code} {resp.reason or ''}".rstrip(),
                    tuple(resp.raw.headers.items()))


def _read(resp: requests.Response, cap: int, *, strict: bool) -> bytes:
    """Stream the decoded body up to ``cap`` bytes; beyond it raise (strict) or stop reading."""
    declared = resp.headers.get("Content-Length", "")
    if strict and declared.isdigit() and int(declared) > cap:
        raise BodyTooLargeError(f"body larger than {cap} bytes (Content-Length {declared})")
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_content(CHUNK_BYTES):
        size += len(chunk)
        if size > cap:
            if strict:
                raise BodyTooLargeError(f"body larger than {cap} bytes")
            break  # the connection is closed rather than drained
        chunks.append(chunk)
    return b"".join(chunks)


def _classify(err: requests.RequestException, deadline: Deadline) -> TransportError:
    message = redact(f"{type(err).__name__}: {err}")[:500]
    if deadline.expired:
        return DeadlineExceededError(deadline.message)
    if isinstance(err, requests.exceptions.ProxyError):
        return ProxyFailedError(message)
    if isinstance(err, requests.exceptions.ReadTimeout) or (err.args and isinstance(err.args[0], ReadTimeoutError)):
        return TransportError(message)  # the server is there but slow: politeness, not retries
    if isinstance(err, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
        return ConnectionFailedError(message)
    return TransportError(message)

