"""A loopback site whose pages change at different rates, for the adaptive-revisit tests.

`ChangingSite` is a `RecordingServer` whose pages a test moves on by calling `next_pass()` between
crawl passes: `/news` changes every pass and links to one new `/article-<n>` each time, `/about` never
changes and answers `If-None-Match` with a 304, `/static` never changes and sends no validator (its
content hash stays the same), and `/` links to all three. Every request is recorded as a `Seen`.
"""

from __future__ import annotations

from typing import Any

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler


class _Handler(SeenHandler):
    site: ChangingSite

    def answer(self, seen: Seen) -> None:
        status, body, headers = self.site.page(seen.path, seen.headers)
        seen.status = status
        self.send_response(status)
        for name, value in {"Content-Type": "text/html; charset=utf-8", **headers,
                            "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _html(title: str, *links: str) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><head><title>{title}</title></head><body><p>{title}</p>{anchors}</body></html>".encode()


class ChangingSite(RecordingServer[Seen]):
    def __init__(self) -> None:
        site = self

        class Handler(_Handler):
            def __init__(self, *args: Any) -> None:
                self.site = site
                super().__init__(*args)

        super().__init__(Handler, name="changing-site", lifetime_s=300)
        self.generation = 0
        self.start()

    def next_pass(self) -> None:
        self.generation += 1

    def page(self, path: str, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        if path == "/":
            return 200, _html("home", "/news", "/about", "/static"), {}
        if path == "/news":
            return 200, _html(f"news, edition {self.generation}", f"/article-{self.generation}"), {}
        if path.startswith("/article-"):
            return 200, _html(f"article {path[9:]}"), {}
        if path == "/about":
            if headers.get("if-none-match") == '"about-1"':
                return 304, b"", {"ETag": '"about-1"'}
            return 200, _html("about us"), {"ETag": '"about-1"'}
        if path == "/static":
            return 200, _html("static page"), {}
        return 404, b"not found", {}

    def fetches(self, path: str) -> int:
        return self.request_count(path)
