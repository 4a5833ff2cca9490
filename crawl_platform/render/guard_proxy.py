"""The local forward proxy every request of a rendering browser goes through.

A page's scripts and sub-resources reach for any address they like, and redirects too; the
browser is started with this proxy as its only way out (``--proxy-server``, with loopback not
bypassed), so each request meets the same rules as the fetcher's:

- **The network guard at connect time.** The proxy resolves the target itself, connects only to
  an address :class:`~crawl_platform.fetch.netguard.NetworkGuard` accepts, and checks the
  connected peer again, so DNS rebinding, scripts and redirects to internal addresses are refused
  like the fetcher's. A refused request gets a ``403`` and is recorded with its reason.
- **robots.txt** of the page's own host applies to its plain HTTP requests (a tunnel hides paths):
  the redirect hops the browser follows on its own, since the page's route
  (:mod:`.page_requests`) has checked every other request already.
- **The crawl's proxies** (``CRAWL_PROXIES``), when it has any: each request then leaves through
  the next healthy one (:mod:`.upstream`), a tunnel as a ``CONNECT`` to it and a plain request in
  absolute form, as the fetcher's do. The proxy resolves the name, so the guard checks what the
  name resolves to here before the request, as the fetcher does through a proxy.

Politeness is not the proxy's: an HTTPS tunnel hides its requests, so the page's route paces every
request, whatever its scheme, on the browser's side of TLS (:class:`~.page_requests.HostGate`).
Pacing here too would count a request twice, and wait on the very turn its route holds.

One proxy serves one browser, which renders one page at a time, so what it records (:class:`ProxyLog`)
is that page's. Runs in the render loop (:mod:`.browsers`); asyncio only, no thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.render.upstream import Streams, TunnelRefusedError, UpstreamError, authorization, open_upstream

MAX_HEAD_BYTES = 64 * 1024
_HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive"})


@dataclass
class ProxyLog:
    """What the proxy did for the page being rendered."""

    requests: int = 0
    refused: list[str] = field(default_factory=list)  # "URL: reason"


class GuardProxy:
    """An HTTP forward proxy on 127.0.0.1 (plain requests and ``CONNECT``) that applies the guard
    and, for the page's own host, its robots.txt (:attr:`allows`); through ``proxies`` when the
    crawl has any."""

    def __init__(self, guard: NetworkGuard, connect_timeout_s: float = 5.0, proxies: ProxyPool | None = None) -> None:
        self.guard = guard
        self.connect_timeout_s = connect_timeout_s
        self.proxies = proxies if proxies else None
        self.log = ProxyLog()
        # Set per page: whether robots.txt allows a plain-HTTP URL (None: not checked).
        self.allows: Callable[[str], bool] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def take_log(self) -> ProxyLog:
        """The log since the last call, and a fresh one for the next page."""
        log, self.log = self.log, ProxyLog()
        return log

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD_BYTES:
                raise ValueError("request head too large")
            await self._handle(head, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError, OSError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        self.log.requests += 1
        if method.upper() == "CONNECT":
            host, _, port_text = target.rpartition(":")
            port = int(port_text)
            shown = f"https://{target}"
            if self.proxies is not None:
                through = await self._via_proxy(host, port, shown, writer, tunnel=True)
                upstream = through[0] if through is not None else None
            else:
                upstream = await self._open(host, port, shown, writer)
            if upstream is None:
                return
            up_reader, up_writer = upstream
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
            return
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            await _answer(writer, 400, "only absolute http:// URLs and CONNECT are proxied")
            return
        if self.allows is not None and not self.allows(target):
            self._refuse(target, "disallowed by robots.txt")
            await _answer(writer, 403, "disallowed by robots.txt")
            return
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        headers = [line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
        if self.proxies is not None:  # the upstream proxy is sent the absolute URL
            through = await self._via_proxy(parts.hostname, parts.port or 80, target, writer, tunnel=False)
            if through is None:
                return
            upstream, proxy = through
            auth = authorization(proxy)
            headers += [f"Proxy-Authorization: {auth}"] if auth else []
            path = target
        else:
            opened = await self._open(parts.hostname, parts.port or 80, target, writer)
            if opened is None:
                return
            upstream = opened
        up_reader, up_writer = upstream
        request = f"{method} {path} {version}\r\n" + "".join(f"{h}\r\n" for h in headers) + "Connection: close\r\n\r\n"
        up_writer.write(request.encode("latin-1"))
        await up_writer.drain()
        await _pipe_both(reader, writer, up_reader, up_writer)

    async def _open(self, host: str, port: int, shown: str, writer: asyncio.StreamWriter,
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Resolve ``host``, connect to the first address the guard accepts, check the peer; None
        after answering the browser itself."""
        host = host.strip("[]")
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as err:
            await _answer(writer, 502, f"cannot resolve {host}: {err}")
            return None
        refusal = None
        for *_, sockaddr in infos:
            address = str(sockaddr[0])
            reason = self.guard.refusal(address)
            if reason is not None:
                refusal = f"{address}, {reason}" if host == address else f"{host} resolves to {address}, {reason}"
                continue
            try:
                connected = await asyncio.wait_for(asyncio.open_connection(address, port), self.connect_timeout_s)
            except (OSError, TimeoutError):
                continue
            peer = str(connected[1].get_extra_info("peername")[0])
            reason = self.guard.refusal(peer)
            if reason is not None:
                connected[1].close()
                refusal = f"{host} connected to {peer}, {reason}"
                break
            return connected
        if refusal is not None:
            self._refuse(shown, refusal)
            await _answer(writer, 403, f"refused by the network guard: {refusal}")
        else:
            await _answer(writer, 502, f"cannot connect to {host}:{port}")
        return None

    async def _via_proxy(self, host: str, port: int, shown: str, writer: asyncio.StreamWriter,
                         tunnel: bool) -> tuple[Streams, str] | None:
        """Streams to the next of the crawl's proxies (a tunnel to ``host:port`` when ``tunnel``)
        and its URL, once every address ``host`` resolves to here passed the guard; None after
        answering the browser itself."""
        host = host.strip("[]")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as err:
            await _answer(writer, 502, f"cannot resolve {host}: {err}")
            return None
        for *_, sockaddr in infos:
            address = str(sockaddr[0])
            reason = self.guard.refusal(address)
            if reason is not None:
                refusal = f"{address}, {reason}" if host == address else f"{host} resolves to {address}, {reason}"
                self._refuse(shown, refusal)
                await _answer(writer, 403, f"refused by the network guard: {refusal}")
                return None
        assert self.proxies is not None
        try:
            return await open_upstream(self.proxies, host, port, tunnel=tunnel, timeout_s=self.connect_timeout_s)
        except TunnelRefusedError as err:
            await _answer(writer, 502, f"the crawl's proxy refused the tunnel: {err}")
        except UpstreamError as err:
            await _answer(writer, 502, f"no proxy of the crawl answered: {err}")
        return None

    def _refuse(self, url: str, reason: str) -> None:
        self.log.refused.append(f"{url}: {reason}")


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = reason.encode()
    writer.write(f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Bad Gateway'}\r\n"
                 f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
                 f"X-Crawl-Refused: {' '.join(reason.split())[:200]}\r\n\r\n".encode("latin-1", "replace") + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


async def _pipe_both(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Copy both ways until the upstream side is done (the answer is complete), then close it."""
    upload = asyncio.ensure_future(_pipe(reader, up_writer))
    try:
        await _pipe(up_reader, writer)
    finally:
        upload.cancel()
        with contextlib.suppress(BaseException):
            await upload
        up_writer.close()
