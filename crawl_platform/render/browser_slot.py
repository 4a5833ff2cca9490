"""One browser of a :class:`~crawl_platform.render.browsers.BrowserPool`: its Chromium process, and each page it loads.

A :class:`BrowserSlot` starts its Chromium itself (so it knows its process id, its memory and can
kill it) and drives it over the DevTools protocol with Playwright; its own
:class:`~.guard_proxy.GuardProxy` is the browser's only way out, and each page's requests are
routed through a :class:`~.page_requests.PageRequests` (robots.txt, and the host's turn on the
pool's :class:`~.page_requests.HostGate`).

A page is loaded from its archived HTTP response (the navigation is answered from it, so the server
sees no second request for the page), in a fresh browser context with service workers blocked,
downloads refused, no permissions granted and pop-ups closed; it is done when it has loaded and
no request was in flight for half a second after that and its main thread is idle, and its DOM is then
serialised. A page over the pool's ``timeout_s``, or whose browser crashed, fails alone: its browser
is killed and the next page gets a fresh one. A browser is also replaced after ``pages_per_browser``
pages, or when its processes hold more than ``max_memory_mb``. The pool (which pages go to which
browser, the loop they run on) is :mod:`crawl_platform.render.browsers`; this module is what happens
inside one browser, which is why the processes, the page's settling and the memory walk live here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawl_platform.render.guard_proxy import GuardProxy
from crawl_platform.render.page_requests import PageRequests
from crawl_platform.render.results import Rendered, RenderJob

if TYPE_CHECKING:
    from crawl_platform.render.browsers import BrowserPool

_DROPPED_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length", "connection", "keep-alive"})
_PR_SET_PDEATHSIG = 1
LAUNCH_TIMEOUT_S = 20.0
QUIET_S = 0.5  # a page has settled when no request of it was in flight for this long after its load
# Resolves once the page's main thread is idle (at most a second later).
_MAIN_THREAD_IDLE = "() => new Promise(done => requestIdleCallback(() => done(null), {timeout: 1000}))"
CLOSE_TIMEOUT_S = 3.0


class BrowserSlot:
    """One browser of the pool, its proxy, and the pages it rendered since it started."""

    def __init__(self, pool: BrowserPool, proxy: GuardProxy) -> None:
        self.pool = pool
        self.proxy = proxy
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.browser: Any = None
        self.profile: str | None = None
        self.pages = 0
        # The next page's context and page, being made while a page settles, with their User-Agent.
        self._spare: tuple[str, asyncio.Future[tuple[Any, Any]]] | None = None

    async def render(self, job: RenderJob) -> Rendered:
        clock = time.monotonic()
        try:
            await self._ensure()
        except Exception as err:  # a browser that does not start fails this page with the reason
            await self.shut()
            return Rendered(job.url, None, f"the browser did not start: {_one_line(err)}")
        self.proxy.take_log()
        robots = self.pool.robots
        self.proxy.allows = robots.known_allows(job.user_agent) if robots is not None else None
        html = shot = error = None
        requests = PageRequests(self.pool.gate, robots, job.user_agent)
        try:
            html, shot = await asyncio.wait_for(self._load(job, requests), self.pool.timeout_s)
        except TimeoutError:
            error = f"the page did not settle within {self.pool.timeout_s:g} s"
        except Exception as err:  # whatever the browser raised is this page's failure
            error = _one_line(err)
        if error is not None:  # a browser that died may not have been reaped yet when its page failed
            for _ in range(20):
                if self.process is None or self.process.poll() is not None:
                    break
                await asyncio.sleep(0.05)
        crashed = self.process is None or self.process.poll() is not None
        if crashed:
            code = self.process.returncode if self.process is not None else None
            error = f"the browser crashed (exit {code})" + (f": {error}" if error else "")
            html = shot = None
        log = self.proxy.take_log()
        self.proxy.allows = None
        self.pages += 1
        if crashed or error is not None or self.pages >= self.pool.pages_per_browser \
                or _tree_memory_mb(self.process) > self.pool.max_memory_mb:
            await self.shut()  # a page that failed may have left the browser hung: the next gets a fresh one
        return Rendered(job.url, html, error, (*requests.refused, *log.refused), shot, time.monotonic() - clock,
                        log.requests)

    async def _load(self, job: RenderJob, requests: PageRequests) -> tuple[str, bytes | None]:
        context, page = await self._page_for(job.user_agent)
        try:
            await requests.attach(context)
            headers = {k: v for k, v in job.headers if k.lower() not in _DROPPED_HEADERS}

            async def answer(route: Any) -> None:
                await route.fulfill(status=job.status, headers=headers, body=job.body)

            # A page route runs before the context's: the navigation is answered here, not paced again.
            await page.route(re.compile("^" + re.escape(job.final_url) + "$"), answer)
            quiet = _Quiet(page)
            await page.goto(job.final_url, wait_until="load")
            # While this page settles, the next one's context and page are made.
            self._spare = (job.user_agent, asyncio.ensure_future(self._new_page(job.user_agent)))
            await quiet.settled()
            # And the page's own work after its last response (the callbacks that build the DOM).
            await page.evaluate(_MAIN_THREAD_IDLE)
            if page.url != job.final_url:  # a script took the page elsewhere: that is not this page's DOM
                raise RuntimeError(f"the page navigated away to {page.url[:200]}")
            html = await page.content()
            shot = await page.screenshot(type="png") if job.screenshot else None
            return html, shot
        finally:
            requests.release()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)

    async def _page_for(self, user_agent: str) -> tuple[Any, Any]:
        """A fresh context and page with ``user_agent``: the spare one made during the last page
        when it has that agent, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None:
            agent, making = spare
            if agent == user_agent:
                with contextlib.suppress(Exception):
                    return await making
            else:
                await _discard(making)
        return await self._new_page(user_agent)

    async def _new_page(self, user_agent: str) -> tuple[Any, Any]:
        """A new browser context (service workers blocked, downloads refused, no permissions) and
        its page; pages a script opens in it are closed."""
        context = await self.browser.new_context(
            user_agent=user_agent, service_workers="block", accept_downloads=False, permissions=[],
            viewport={"width": 1280, "height": 800}, java_script_enabled=True)
        try:
            page = await context.new_page()
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)
            raise
        context.on("page", _close_popup)  # after the page's own: every later one is a pop-up
        return context, page

    async def _ensure(self) -> None:
        # Chromium refuses its sandbox to root: as root (a container) it runs without one, and the
        # guard proxy and a fresh context per page are what hold it in.
        if self.browser is not None and self.process is not None and self.process.poll() is None:
            return
        await self.shut()
        if not self.port:
            self.port = await self.proxy.start()
        self.profile = tempfile.mkdtemp(prefix="crawl-render-")
        memory = max(64, self.pool.max_memory_mb // 2)
        argv = [self.pool.executable, "--headless", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
                *(["--no-sandbox"] if os.geteuid() == 0 else []), "--disable-gpu", "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--disable-default-apps", "--disable-dev-shm-usage", "--mute-audio",
                "--block-new-web-contents", "--disable-features=Translate,MediaRouter,OptimizationHints",
                # A page settling while the next one's context is made goes to the background; its
                # timers and renderer must keep their pace, or a page that never settles looks settled.
                "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
                "--disable-renderer-backgrounding",
                f"--proxy-server=http://127.0.0.1:{self.port}", "--proxy-bypass-list=<-loopback>",
                f"--js-flags=--max-old-space-size={memory}", "about:blank"]
        env = None
        if self.pool.ca_file:
            env = {**os.environ, "HOME": await self.pool.trusting_home()}
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_die_with_parent)  # noqa: PLW1509 - only prctl, async-signal-safe
        self.pool.launches += 1
        endpoint = await self._devtools_endpoint()
        self.browser = await self.pool.playwright.chromium.connect_over_cdp(endpoint, timeout=LAUNCH_TIMEOUT_S * 1000)
        self.pages = 0

    async def _devtools_endpoint(self) -> str:
        """The DevTools URL the browser writes into its profile once it listens."""
        assert self.profile is not None
        assert self.process is not None
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.pool.executable} exited with {self.process.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                port = int(marker.read_text().split()[0])
                return f"http://127.0.0.1:{port}"
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.pool.executable} did not listen within {LAUNCH_TIMEOUT_S:g} s")

    async def shut(self) -> None:
        """End this slot's browser, gracefully if it answers, else by killing its processes."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await _discard(spare[1])
        browser, self.browser = self.browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT_S)
        self.kill_process()

    def kill_process(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # the browser and its renderers (its own session)
            with contextlib.suppress(Exception):
                process.wait(timeout=5)
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None



_CLOSING: set[asyncio.Future[Any]] = set()  # pop-ups being closed (a reference each until done)


class _Quiet:
    """Counts a page's requests in flight, to wait until none was for :data:`QUIET_S` after its
    load. Playwright's ``networkidle`` may have fired before the load (a gap between two requests
    while the page's scripts were slow to run), and would then not wait for the requests after."""

    def __init__(self, page: Any) -> None:
        self.in_flight = 0
        self.last = time.monotonic()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _started(self, _request: Any) -> None:
        self.in_flight += 1
        self.last = time.monotonic()

    def _ended(self, _request: Any) -> None:
        self.in_flight -= 1
        self.last = time.monotonic()

    async def settled(self) -> None:
        self.last = max(self.last, time.monotonic())
        while self.in_flight > 0 or time.monotonic() - self.last < QUIET_S:
            await asyncio.sleep(0.05)


async def _discard(making: asyncio.Future[tuple[Any, Any]]) -> None:
    """Close a spare context (or stop making it)."""
    if not making.done():
        making.cancel()
    with contextlib.suppress(BaseException):
        context, _page = await making
        await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)


def _close_popup(page: Any) -> None:
    """Pop-ups are off: a page a script opens is closed at once."""
    closing = asyncio.ensure_future(page.close())
    _CLOSING.add(closing)
    closing.add_done_callback(_CLOSING.discard)


def _die_with_parent() -> None:
    """In the browser's process before exec: die when the thread that started it ends."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tree_memory_mb(process: subprocess.Popen[bytes] | None) -> float:
    """Memory of a browser and all its descendants, in MiB (0 when it is gone): each process's
    resident pages less those it shares (with the others: the browser's code and shared memory,
    which a sum of RSS would count once per process). Walks the kernel's list of each process's
    children rather than every process of the machine."""
    if process is None or process.poll() is not None:
        return 0.0
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    stack, seen = [process.pid], set[int]()
    while stack and len(seen) < 10_000:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/statm").read_text().split()
            total += (int(fields[1]) - int(fields[2])) * page
            for task in os.scandir(f"/proc/{pid}/task"):
                stack += [int(c) for c in Path(task.path, "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total / (1024 * 1024)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:300]
