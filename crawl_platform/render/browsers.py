"""A pool of headless Chromium browsers that render pages, one page at a time per browser.

:class:`BrowserPool` runs its own asyncio loop in a thread of its own (so it works the same in a
Dagster step, a Celery task or a test) and answers :meth:`BrowserPool.render_all` for a list of
:class:`~crawl_platform.render.results.RenderJob`, giving each job to the next free browser. Each
browser is a :class:`~crawl_platform.render.browser_slot.BrowserSlot`: a Chromium process driven
with Playwright (which is imported here and nowhere else) behind a
:class:`~.guard_proxy.GuardProxy` of its own, which sends every request on through the crawl's
proxies when it has any; all browsers share one :class:`~.page_requests.HostGate` for the hosts'
turns and one robots.txt cache. How a browser loads a page, fails it alone and is replaced is
:mod:`crawl_platform.render.browser_slot`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Callable, Iterable
from typing import Any

from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.fetch.proxies import ProxyPool
from crawl_platform.fetch.robots import RobotsCache
from crawl_platform.render.browser_slot import BrowserSlot
from crawl_platform.render.guard_proxy import GuardProxy
from crawl_platform.render.page_requests import HostGate, PageRobots
from crawl_platform.render.results import Rendered, RenderJob
from crawl_platform.render.trust import nss_home


class BrowserPool:
    """Browsers rendering pages side by side; :meth:`close` ends every process it started."""

    def __init__(self, executable: str, guard: NetworkGuard, gate: HostGate, *, browsers: int = 2,
                 pages_per_browser: int = 50, timeout_s: float = 20.0, max_memory_mb: int = 1024,
                 connect_timeout_s: float = 5.0, ca_file: str = "", robots: RobotsCache | None = None,
                 proxies: ProxyPool | None = None) -> None:
        """``robots``: the robots.txt of the hosts the pages ask for (None: robots.txt not obeyed);
        ``proxies``: the crawl's (``CRAWL_PROXIES``), None for none."""
        self.executable = executable
        self.robots = PageRobots(robots, gate) if robots is not None else None
        self.ca_file = ca_file  # CAs the browsers trust besides their own roots (CRAWL_TLS_CA_FILE)
        self._home: str | None = None  # the browsers' HOME, whose NSS database trusts them
        self.guard = guard
        self.gate = gate
        self.browsers = max(1, browsers)
        self.pages_per_browser = pages_per_browser
        self.timeout_s = timeout_s
        self.max_memory_mb = max_memory_mb
        self.connect_timeout_s = connect_timeout_s
        self.proxies = proxies  # CRAWL_PROXIES, shared by the browsers' guard proxies
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="render-loop", daemon=True)
        self._thread.start()
        self.playwright: Any = None  # the Playwright driver, started at the first render_all
        self._slots: list[BrowserSlot] = []
        self._free: asyncio.Queue[BrowserSlot] | None = None
        self.launches = 0  # browsers started, replacements included

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the render loop's thread (the gate and proxies live there); its result."""
        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def render_all(self, jobs: Iterable[RenderJob],
                   hold: Callable[[RenderJob], bool] | None = None) -> dict[str, Rendered]:
        """Render every job, ``browsers`` at a time; each job's :class:`Rendered` by its URL.
        ``hold`` is asked once a browser is free for a job, before it loads the page (in a thread
        of its own, as it may read the lake): a job it holds is not loaded and has no result."""
        jobs = list(jobs)
        if not jobs:
            return {}
        return asyncio.run_coroutine_threadsafe(self._render_all(jobs, hold), self._loop).result()

    def pids(self) -> list[int]:
        """Process ids of the browsers running now (their main processes)."""
        return [s.process.pid for s in self._slots if s.process is not None and s.process.poll() is None]

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        for slot in self._slots:  # whatever the loop could not end
            slot.kill_process()

    async def _render_all(self, jobs: list[RenderJob],
                          hold: Callable[[RenderJob], bool] | None = None) -> dict[str, Rendered]:
        if self.playwright is None:
            from playwright.async_api import async_playwright  # noqa: PLC0415 - only rendering imports it

            self.playwright = await async_playwright().start()
        if self._free is None:
            self._free = asyncio.Queue()
            for _ in range(self.browsers):
                slot = BrowserSlot(self, GuardProxy(self.guard, self.connect_timeout_s, self.proxies))
                self._slots.append(slot)
                self._free.put_nowait(slot)
        results = await asyncio.gather(*(self._render_one(job, hold) for job in jobs))
        return {r.url: r for r in results if r is not None}

    async def _render_one(self, job: RenderJob, hold: Callable[[RenderJob], bool] | None) -> Rendered | None:
        assert self._free is not None
        slot = await self._free.get()
        try:
            if hold is not None and await asyncio.to_thread(hold, job):
                return None
            return await slot.render(job)
        finally:
            self._free.put_nowait(slot)

    async def trusting_home(self) -> str:
        """The browsers' ``HOME``, made once: its NSS database trusts the CAs of :attr:`ca_file`."""
        if self._home is None:
            self._home = await asyncio.to_thread(nss_home, self.ca_file)
        return self._home

    async def _close(self) -> None:
        for slot in self._slots:
            await slot.shut()
            await slot.proxy.close()
        if self.playwright is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.playwright.stop(), 10)
            self.playwright = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
