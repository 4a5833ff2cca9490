"""The Python 3.11 documentation (Debian's ``python3.11-doc``, 530 HTML pages nobody here wrote)
served on loopback, with a log of every request.

`DocsSite` is a `RecordingServer` whose handler serves the files under `DOCS_ROOT` with their
media type (HTML, the ``_sources`` ``.rst.txt`` files, images), 404 for anything else, and under
``/broken/PATH`` the first `BROKEN_FRACTION` of page PATH's bytes: real markup cut off mid-tag, the
broken HTML a crawler meets. The extraction tests crawl it and then assert which requests it saw
(none, when records are re-extracted from the archive); `crawl_docs` crawls chosen pages of it with
the engine's crawl loop, and `footer_date` reads a page's date off its file. The fixture
`python_docs` is in ``tests/conftest.py``; the site refuses to start when the package is missing,
naming the install.
"""

from __future__ import annotations

import mimetypes
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler

DOCS_ROOT = Path("/usr/share/doc/python3.11/html")
BROKEN_FRACTION = 0.4


class _Handler(SeenHandler):
    def __init__(self, site: DocsSite, *args: Any) -> None:
        self.site = site  # set first: the base class answers the request inside __init__
        super().__init__(*args)

    def answer(self, seen: Seen) -> None:
        status, content_type, body = self.site.reply(urlsplit(self.path).path)
        # Recorded before the reply goes out: a client that has its response may look at once.
        seen.status, seen.bytes_sent = status, len(body)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class DocsSite(RecordingServer[Seen]):
    """The documentation on 127.0.0.1 (a free port); serving from construction, a context manager."""

    def __init__(self, root: Path = DOCS_ROOT) -> None:
        if not (root / "library" / "functions.html").is_file():
            raise RuntimeError(f"no Python documentation at {root}: apt-get install python3.11-doc")
        super().__init__(partial(_Handler, self), name="python-docs", lifetime_s=300.0)
        self.root = root.resolve()
        self.start()

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def reply(self, path: str) -> tuple[int, str, bytes]:
        broken = path.startswith("/broken/")
        relative = unquote(path.removeprefix("/broken/" if broken else "/")) or "index.html"
        file = (self.root / relative).resolve()
        if not file.is_relative_to(self.root) or not file.is_file():
            return 404, "text/html; charset=utf-8", b"<html><body><h1>Not Found</h1></body></html>"
        body = file.read_bytes()
        if broken:
            body = body[:int(len(body) * BROKEN_FRACTION)]
        media_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if media_type.startswith("text/"):
            media_type += "; charset=utf-8"
        return 200, media_type, body


def footer_date(path: str, root: Path = DOCS_ROOT) -> date:
    """The date in a page's footer ("Last updated on October 07, 2026."), read off the file."""
    text = (root / path).read_text()
    words = text[text.index("Last updated on ") + len("Last updated on "):].split(".")[0]
    return datetime.strptime(words, "%B %d, %Y").date()


# The pages the extraction tests crawl (seeds at depth 0: exactly these are fetched), one of each
# kind: known pages, a plain-text source file, a page cut off mid-markup, and a 404.
DOCS_PAGES = ("library/functions.html", "library/json.html", "tutorial/introduction.html", "glossary.html")
ODD_PAGES = ("_sources/library/functions.rst.txt", "broken/library/functions.html", "no-such-page.html")


def crawl_docs(settings: Any, bus: Any, store: Any, docs: DocsSite, crawl_id: str, rules: Any,
               pages: tuple[str, ...] = DOCS_PAGES + ODD_PAGES) -> None:
    """Crawl ``pages`` of the site with the engine's crawl loop (fetch → archive → land) as crawl
    ``crawl_id`` carrying extraction ``rules``, until nothing is pending."""
    from crawl_platform.pipeline.submission import build_crawl_request  # noqa: PLC0415
    from tests.unit.crawl_rows import crawl_loop  # noqa: PLC0415

    request = build_crawl_request([docs.url(p) for p in pages], crawl_id, max_pages=max(100, len(pages)),
                                  max_depth=0, extract=rules)
    loop = crawl_loop(settings, bus, store)
    loop.crawler.frontier.register(request)
    loop.run_until_idle(max_turns=100)
