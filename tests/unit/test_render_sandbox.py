"""What a rendered page cannot do: download, open pop-ups, register a service worker, get a permission.

One page of ``tests.sites.sandbox`` tries each and writes what it got into its DOM; it is rendered
once by a real :class:`~crawl_platform.render.browsers.BrowserPool` (Debian's ``chromium``), with
``HOME`` and the temporary directory pointed at a folder of the test's own, so anything the browser
wrote is there to find. Each test reads the landed DOM, the site's request log or that folder.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest

from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.render import find_browser
from crawl_platform.render.browsers import BrowserPool
from crawl_platform.render.page_requests import HostGate
from crawl_platform.render.results import Rendered, RenderJob
from tests.conftest import requires_browser
from tests.sites.sandbox import DOWNLOAD_MARKER, POPUPS, SandboxSite

pytestmark = requires_browser
# Chromium's shared memory between its processes (a file in the temporary directory, with
# --disable-dev-shm-usage): every response passes through it on its way to the page, the page's own
# script included, and it is unlinked at once. Not a download.
_SHARED_MEMORY = ".org.chromium.Chromium."


@dataclass
class Sandboxed:
    site: SandboxSite
    rendered: Rendered
    probes: dict[str, str]
    disk: Path  # HOME and the temporary directory of the browser
    written: list[Path]  # files under ``disk`` that held a download's marker while the page rendered


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandboxed]:
    disk = tmp_path_factory.mktemp("browser-disk")
    (disk / "home").mkdir()
    (disk / "tmp").mkdir()
    executable = find_browser()
    assert executable is not None
    with pytest.MonkeyPatch.context() as patch, SandboxSite() as site:
        patch.setenv("HOME", str(disk / "home"))
        patch.setenv("TMPDIR", str(disk / "tmp"))
        patch.setattr("tempfile.tempdir", str(disk / "tmp"))  # where the pool makes each browser's profile
        pool = BrowserPool(executable, NetworkGuard(["127.0.0.1/32"]), HostGate(0.0), browsers=1)
        try:
            status, headers, body = site.page("/sandbox")
            job = RenderJob(site.url, site.url, status, tuple(headers.items()), body, "sandbox-test/1.0")
            with _DiskWatch(disk) as watch:
                rendered = pool.render_all([job])[site.url]
        finally:
            pool.close()
        html = rendered.html or ""
        probes = {name: unescape(value) for name, value in
                  re.findall(r'<li data-probe="([^"]+)">([^<]*)</li>', html)}
        yield Sandboxed(site, rendered, probes, disk, sorted(watch.written))


class _DiskWatch:
    """Looks through ``root`` every 20 ms, while the page renders, for files holding a download's
    marker: a browser that saved a download may delete it when the page's context closes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: set[Path] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> _DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._look()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self._look()

    def _look(self) -> None:
        for path in self.root.rglob("*"):
            if path.name.startswith(_SHARED_MEMORY):
                continue
            with contextlib.suppress(OSError):
                if path.is_file() and DOWNLOAD_MARKER in path.read_bytes():
                    self.written.add(path)


def test_the_page_lands_with_every_probe_answered(sandboxed):
    assert (sandboxed.rendered.error, sandboxed.rendered.refused) == (None, ())
    assert 'data-done="yes"' in (sandboxed.rendered.html or "")
    assert "<h1>Sandbox</h1>" in (sandboxed.rendered.html or "")


def test_downloads_are_refused_and_nothing_reaches_the_disk(sandboxed):
    # The page did ask for both (the browser sent the requests) ...
    assert sandboxed.site.request_count("/download/file.bin") == 1
    assert sandboxed.site.request_count("/download/attachment") == 1
    # ... and no byte of either was saved: not in HOME (~/Downloads), the profile, or the temporary folder.
    assert sandboxed.written == []
    assert not (sandboxed.disk / "home" / "Downloads").exists()


def test_pop_ups_are_not_opened_and_their_urls_never_requested(sandboxed):
    assert sandboxed.probes["window.open"] == "null"
    assert [s.path for s in sandboxed.site.requests if s.path in POPUPS] == []


def test_service_workers_do_not_register(sandboxed):
    assert sandboxed.probes["serviceWorker.register"] == "none"
    assert sandboxed.probes["serviceWorker.register from another realm"] == "none"
    assert sandboxed.probes["serviceWorker.getRegistrations"] == "0"
    assert [s.path for s in sandboxed.site.requests if s.path.startswith("/sw.js")] == []


def test_permissions_are_denied(sandboxed):
    assert {name: value for name, value in sandboxed.probes.items()
            if "ermission" in name or name.startswith(("geolocation", "clipboard"))} == {
        "Notification.requestPermission": "denied",
        "permissions.query notifications": "denied",
        "permissions.query geolocation": "denied",
        "permissions.query clipboard-read": "denied",
        "geolocation.getCurrentPosition": "error code 1",  # PERMISSION_DENIED
        "clipboard.readText": "refused: NotAllowedError",
    }
