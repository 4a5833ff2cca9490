"""The crawl's own proxies (``CRAWL_PROXIES``) behind the guard proxy, so rendered requests leave as fetched ones do.

:func:`open_upstream` connects to the next healthy proxy of a :class:`~crawl_platform.fetch.proxies.ProxyPool`
(over TLS for an ``https://`` proxy) and, for an HTTPS tunnel, asks it to ``CONNECT`` to the target;
a plain HTTP request is then sent to it in absolute form with :func:`authorization`. A proxy that
cannot be reached, or answers the ``CONNECT`` with ``407`` or a broken answer, is benched for the
pool's cooldown and the next one tried, as the fetcher does. The destination's addresses are the
guard proxy's to check before this is called: the upstream proxy resolves the name itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from urllib.parse import unquote, urlsplit

from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.redaction import redact_passwords as redact

MAX_HEAD_BYTES = 64 * 1024

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class UpstreamError(Exception):
    """No proxy of the pool gave a connection (the message names no credentials)."""


class TunnelRefusedError(Exception):
    """The proxy answered the ``CONNECT`` with a status other than 2xx or 407 (its own refusal of
    the target, not a failure of the proxy): ``status`` and the status line."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status


def authorization(proxy: str) -> str | None:
    """The ``Proxy-Authorization`` value for ``proxy``'s user and password, None without them."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return None
    token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return "Basic " + base64.b64encode(token).decode()


async def open_upstream(proxies: ProxyPool, host: str, port: int, *, tunnel: bool,
                        timeout_s: float) -> tuple[Streams, str]:
    """Streams to the next proxy that answers, and that proxy's URL. With ``tunnel`` the proxy has
    accepted ``CONNECT host:port`` (the streams carry the tunnel). Raises :class:`UpstreamError`
    when every proxy failed, :class:`TunnelRefusedError` when one refused the target."""
    tried: list[str] = []
    reason = "no proxy configured"
    while (proxy := proxies.pick(exclude=tried)) is not None:
        tried.append(proxy)
        try:
            streams = await _connect(proxy, timeout_s)
        except (OSError, TimeoutError, ssl.SSLError) as err:
            reason = f"cannot connect: {' '.join(str(err).split()) or type(err).__name__}"
        else:
            if not tunnel:
                return streams, proxy
            try:
                status, line = await asyncio.wait_for(_connect_tunnel(streams, proxy, host, port), timeout_s)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
                reason = f"broken answer to CONNECT: {' '.join(str(err).split()) or type(err).__name__}"
            else:
                if 200 <= status < 300:
                    return streams, proxy
                if status != 407:
                    _close(streams)
                    raise TunnelRefusedError(status, line)
                reason = "407 Proxy Authentication Required"
            _close(streams)
        proxies.failed(proxy)
    raise UpstreamError(redact(f"all {len(tried)} proxies failed, the last with: {reason}"))


async def _connect(proxy: str, timeout_s: float) -> Streams:
    parts = urlsplit(proxy)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    context = ssl.create_default_context() if secure else None
    return await asyncio.wait_for(
        asyncio.open_connection(host, port, ssl=context, server_hostname=host if secure else None), timeout_s)


async def _connect_tunnel(streams: Streams, proxy: str, host: str, port: int) -> tuple[int, str]:
    """Send ``CONNECT`` and read the proxy's answer head: its status and status line."""
    reader, writer = streams
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    auth = authorization(proxy)
    writer.write((f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
                  + (f"Proxy-Authorization: {auth}\r\n" if auth else "") + "\r\n").encode("latin-1"))
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise ValueError("answer head too large")
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    return int(line.split(" ", 2)[1]), line


def _close(streams: Streams) -> None:
    with contextlib.suppress(Exception):
        streams[1].close()
