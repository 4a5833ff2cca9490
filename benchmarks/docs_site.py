"""The benchmark's real site: Debian's Python 3.11 documentation (``python3.11-doc``) served by nginx.

``serve_docs`` serves it read-only from where it is installed, with ``static_site.NginxServer``;
``docs_expected_urls`` computes the pages a host-scoped crawl reaches, by a BFS over the files'
links parsed with lxml (neither crawler's code). Used by ``compare.py --docs``.
"""

from __future__ import annotations

import contextlib
import shutil
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from static_site import NO_VALIDATORS, NginxServer, ServedSite

from crawl_platform.urls import canonicalize

DOCS_ROOT = Path("/usr/share/doc/python3.11/html")  # Debian's python3.11-doc


def docs_expected_urls(root: Path, base_url: str) -> set[str]:
    """Canonical URLs a host-scoped crawl from ``base_url + "/"`` reaches over a real site on disk:
    a BFS over every ``<a href>`` (and ``<area href>``) of its HTML files to targets that exist as
    files (a folder means its index.html), whatever their type. Parsed with lxml, not with either
    crawler's code."""
    import lxml.html  # noqa: PLC0415

    def file_of(path: str) -> Path | None:
        target = root / path.lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        return target if target.is_file() else None

    seen, queue = {"/"}, deque(["/"])
    while queue:
        path = queue.popleft()
        target = file_of(path)
        if target is None or target.suffix != ".html":
            continue
        doc = lxml.html.fromstring(target.read_bytes())
        for el in doc.iter("a", "area"):
            href = el.get("href")
            if not href:
                continue
            url = urldefrag(urljoin(base_url + path, href.strip())).url
            parts = urlsplit(url)
            if f"{parts.scheme}://{parts.netloc}" != base_url or parts.path in seen:
                continue
            if file_of(parts.path) is not None:
                seen.add(parts.path)
                queue.append(parts.path)
    return {canonicalize(base_url + p) for p in seen if file_of(p) is not None}


@contextlib.contextmanager
def serve_docs(workdir: Path, root: Path = DOCS_ROOT, validators: bool = True) -> Iterator[ServedSite]:
    """A real site nobody here wrote, served by nginx: the Python 3.11 documentation from Debian's
    ``python3.11-doc`` (``apt-get install python3.11-doc``), read-only where it is installed.
    ``validators=False``: no ETag, and conditional requests are ignored (always a full answer)."""
    if not (root / "index.html").is_file():
        raise RuntimeError(f"{root} is missing: apt-get install python3.11-doc")
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        raise RuntimeError("the docs site needs nginx (apt-get install nginx-light)")
    server = NginxServer(root, workdir / "nginx", server_extra="" if validators else NO_VALIDATORS).start()
    try:
        expected = docs_expected_urls(root, server.base_url)
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        yield ServedSite(server.base_url, expected, f"nginx serving {root}", server, size)
    finally:
        server.stop()
