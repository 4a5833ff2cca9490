"""A site that seed intake reads sitemaps from: robots.txt (with a ``Crawl-delay`` and a
``Sitemap:`` line), the sitemap it names, ``/sitemap.xml``, and the pages they list.

Every request is recorded as a `tests.sites.Seen` (arrival and finish times included), so a test
can tell which requests intake made and how far apart. With ``hold_sitemaps`` the sitemap
answers wait until :meth:`SitemapSite.release` (or the site closes): a test can then look at the
platform while intake is in the middle of fetching them; :attr:`sitemap_asked` is set when the
first sitemap request arrives.
"""

from __future__ import annotations

import threading

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler


class _Handler(SeenHandler):
    site: SitemapSite

    def answer(self, seen: Seen) -> None:
        site = self.server.site  # type: ignore[attr-defined]
        path = seen.path.split("?")[0]
        if path == "/robots.txt":
            self._send(200, "text/plain", site.robots_txt().encode())
        elif path in ("/sitemap-pages.xml", "/sitemap.xml"):
            site.sitemap_asked.set()
            if site.hold_sitemaps:
                site.released.wait(120)
            self._send(200, "application/xml", site.sitemap(path).encode())
        else:
            self._send(200, "text/html", f"<html><title>{path}</title><body>{path}</body></html>".encode())

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SitemapSite(RecordingServer[Seen]):
    """The site on a free loopback port, serving once built; a context manager that closes it."""

    def __init__(self, pages: int = 3, crawl_delay_s: float = 0.0, hold_sitemaps: bool = False) -> None:
        super().__init__(_Handler, name="sitemap-site")
        self._server.site = self  # type: ignore[attr-defined]
        self.pages = pages
        self.crawl_delay_s = crawl_delay_s
        self.hold_sitemaps = hold_sitemaps
        self.sitemap_asked = threading.Event()
        self.released = self.stopping if not hold_sitemaps else threading.Event()
        self.start()

    def robots_txt(self) -> str:
        delay = f"Crawl-delay: {self.crawl_delay_s:g}\n" if self.crawl_delay_s else ""
        return f"User-agent: *\nAllow: /\n{delay}Sitemap: {self.base_url}/sitemap-pages.xml\n"

    def sitemap(self, path: str) -> str:
        first = 0 if path == "/sitemap-pages.xml" else self.pages  # /sitemap.xml lists other pages
        locs = "".join(f"<url><loc>{self.base_url}/page/{n}</loc></url>" for n in range(first, first + self.pages))
        return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        super().close()
