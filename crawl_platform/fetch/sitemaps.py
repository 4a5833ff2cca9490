"""Seeds from sitemaps: the ``Sitemap:`` lines of robots.txt and ``/sitemap.xml``.

:func:`discover_sitemap_urls` is what the seed intake calls for a crawl submitted with
``use_sitemaps``: it reads the seed host's sitemaps through the crawl's :class:`Fetcher` (so the
network guard, robots.txt, timeouts, size caps and politeness all apply), follows sitemap
indexes, unpacks gzip sitemaps with a cap on the unpacked size, and returns up to ``limit``
canonical page URLs; the intake admits them at depth 1. Parsing is lxml's, with entity
expansion and network access off (a sitemap is untrusted XML). Plain-text sitemaps (one URL per
line) are read too. Bounded throughout: at most ``max_files`` sitemap files per seed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from crawl_platform.fetch.fetcher import Fetcher, FetchRequest
from crawl_platform.fetch.netguard import BlockedAddressError
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.urls import InvalidURLError, canonicalize

MAX_SITEMAP_FILES = 20
_GZIP_MAGIC = b"\x1f\x8b"


def discover_sitemap_urls(fetcher: Fetcher, seed_url: str, limit: int, *, user_agent: str | None = None,
                          in_scope: Callable[[str], bool] | None = None,
                          max_files: int = MAX_SITEMAP_FILES) -> list[str]:
    """Page URLs listed in the sitemaps of ``seed_url``'s host, first ``limit`` in sitemap order,
    deduplicated and canonical, filtered by ``in_scope`` when given. Never raises for what a
    server sends: an unreachable or broken sitemap contributes nothing."""
    origin = origin_of(seed_url)
    try:
        listed = fetcher.robots.policy(origin).sitemaps
    except BlockedAddressError:  # the network guard refuses the host: nothing of it is read
        return []
    queue = [*listed, origin + "/sitemap.xml"]
    fetched: set[str] = set()
    found: dict[str, None] = {}
    while queue and len(fetched) < max_files and len(found) < limit:
        sitemap = queue.pop(0)
        try:
            sitemap = canonicalize(sitemap)
        except InvalidURLError:
            continue
        if sitemap in fetched:
            continue
        fetched.add(sitemap)
        result = fetcher.fetch(FetchRequest(sitemap, user_agent=user_agent, accept_any=True))
        if result.status != 200 or not result.body:
            continue
        kind, locations = parse_sitemap(unpack(result.body, fetcher.transport.max_body_bytes))
        if kind == "sitemapindex":
            queue.extend(locations)
            continue
        for location in locations:
            try:
                url = canonicalize(location)
            except InvalidURLError:
                continue
            if in_scope is None or in_scope(url):
                found.setdefault(url)
                if len(found) >= limit:
                    break
    return list(found)


def unpack(body: bytes, max_bytes: int) -> bytes:
    """A gzip sitemap unpacked to at most ``max_bytes`` (a bomb is cut off); other bodies as they are."""
    if not body.startswith(_GZIP_MAGIC):
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return inflater.decompress(body, max_bytes)
    except zlib.error:
        return b""


def parse_sitemap(body: bytes) -> tuple[str, list[str]]:
    """(``"urlset"`` or ``"sitemapindex"``, the ``<loc>`` values) of an XML or plain-text sitemap."""
    import lxml.etree  # noqa: PLC0415

    stripped = body.lstrip()
    if not stripped.startswith(b"<"):
        lines = stripped.decode("utf-8", "replace").splitlines()
        return "urlset", [line.strip() for line in lines if line.strip().startswith(("http://", "https://"))]
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
    try:
        root = lxml.etree.fromstring(stripped, parser=parser)
    except lxml.etree.XMLSyntaxError:
        return "urlset", []
    if root is None:
        return "urlset", []
    kind = lxml.etree.QName(root).localname.lower()
    locations = [
        (el.text or "").strip() for el in root.iter()
        if isinstance(el.tag, str) and lxml.etree.QName(el).localname == "loc" and (el.text or "").strip()
    ]
    return ("sitemapindex" if kind == "sitemapindex" else "urlset"), locations
