"""A small site whose ordinary pages sit beside pages that are bad in the ways a crawl must survive,
served by the hostile site (`tests.sites.hostile.HostileSite`), which logs every request.

`serve_bad_pages(site)` puts the pages on a `HostileSite` and returns a `BadPages` saying what each
URL is; `assert_crawled(store, pages, site)` checks a crawl of it as a user would: every page lands
once, fetched once, each bad page with what went wrong recorded on its row, and nothing is left to
fetch. The bad pages: a charset label whose Python codec cannot decode with replacement (``idna``,
``punycode``, ``undefined``) in the Content-Type header and in ``<meta>``; an 8 MB page of 300,000
links; a ``<base href>`` that is no URL; a redirect to no URL (``Location: http://[``); a page of
200,000 nested ``<div>`` elements, which lexbor and the main-content extractor choke on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.main_text import TOO_DEEP_ERROR
from crawl_platform.store.database import CrawlStore
from tests.sites.hostile import HostileSite, Reply, html_page

ORDINARY_PAGES = 30
BAD_CODECS = ("idna", "punycode", "undefined")
TITLE = "Grüße aus Köln"
MANY_LINKS = 300_000


@dataclass
class BadPages:
    """The site's URLs by what they are."""

    base_url: str
    ordinary: list[str] = field(default_factory=list)  # the home page and /ok/<n>
    charsets: dict[str, str] = field(default_factory=dict)  # URL -> the codec its label names
    many_links: str = ""
    bad_base: str = ""
    bad_redirect: str = ""
    deep: str = ""

    def urls(self) -> set[str]:
        return {*self.ordinary, *self.charsets, self.many_links, self.bad_base, self.bad_redirect, self.deep}


def _paths() -> dict[str, str]:
    paths = {f"/charset/header-{codec}": codec for codec in BAD_CODECS}
    return paths | {f"/charset/meta-{codec}": codec for codec in BAD_CODECS}


def serve_bad_pages(site: HostileSite) -> BadPages:
    """Serve the site on ``site`` (its robots.txt allows everything): the home page links to every
    page, each ordinary page to the home page and the next one."""
    pages = BadPages(site.base_url)
    charsets = _paths()
    specials = ["/many-links", "/bad-base", "/bad-redirect", "/deep"]
    ordinary = [f"/ok/{n}" for n in range(ORDINARY_PAGES)]
    site.robots = Reply(200, b"User-agent: *\nAllow: /\n", {"Content-Type": "text/plain"})
    site.static["/"] = Reply(200, html_page("Home", *ordinary, *charsets, *specials))
    for n, path in enumerate(ordinary):
        site.static[path] = Reply(200, html_page(f"Ordinary {n}", "/", ordinary[(n + 1) % len(ordinary)]))
    for path, codec in charsets.items():
        text = f"<p>{TITLE}</p><a href='/'>home</a>"
        if path.startswith("/charset/header-"):
            site.static[path] = Reply(200, f"<html><head><title>{TITLE}</title></head><body>{text}</body></html>"
                                      .encode(), {"Content-Type": f"text/html; charset={codec}"})
        else:
            site.static[path] = Reply(200, f"<html><head><meta charset='{codec}'><title>{TITLE}</title></head>"
                                           f"<body>{text}</body></html>".encode(), {"Content-Type": "text/html"})
    # Links off the site, so the crawl (scoped to the host) admits none of them: the cut is the point.
    anchors = "".join(f"<a href=//x.invalid/{i}></a>" for i in range(MANY_LINKS))
    site.static["/many-links"] = Reply(200, f"<html><head><title>Many links</title></head><body>{anchors}"
                                            "</body></html>".encode())
    site.static["/bad-base"] = Reply(200, b"<html><head><base href='http://['><title>Bad base</title></head>"
                                          b"<body><p>Bad base text</p><a href='/ok/0'>first</a></body></html>")
    site.static["/bad-redirect"] = Reply(302, b"", {"Location": "http://["})
    site.static["/deep"] = Reply(200, b"<html><head><title>Deep</title></head><body><a href='/'>home</a>"
                                      + b"<div>x" * 200_000 + b"</div>" * 200_000 + b"</body></html>")
    pages.ordinary = [site.url("/"), *(site.url(p) for p in ordinary)]
    pages.charsets = {site.url(p): codec for p, codec in charsets.items()}
    pages.many_links, pages.bad_base = site.url("/many-links"), site.url("/bad-base")
    pages.bad_redirect, pages.deep = site.url("/bad-redirect"), site.url("/deep")
    return pages


def assert_crawled(store: CrawlStore, pages: BadPages, site: HostileSite, crawl_id: str,
                   max_links: int = MAX_LINKS_PER_PAGE) -> None:
    """The crawl ``crawl_id`` of the site: every page landed once and was fetched once, the bad
    ones with what went wrong on their rows, and nothing is left pending."""
    rows = store.query(
        "SELECT p.url, p.status, p.error, p.charset, d.title, d.parse_error, d.links_truncated, d.main_text_error "
        "FROM pages p LEFT JOIN documents d USING (url, version) WHERE p.crawl_id = ?", [crawl_id])
    landed = {r[0]: r[1:] for r in rows}
    assert len(rows) == len(landed), "a page landed twice"
    assert set(landed) == pages.urls()
    site.settle()
    assert {url: site.request_count(url[len(site.base_url):]) for url in pages.urls()} == dict.fromkeys(pages.urls(), 1)
    for url in pages.ordinary:
        status, error, charset, title, parse_error, _cut, _main_error = landed[url]
        assert (status, error, charset, parse_error) == (200, None, "utf-8", None), url
        assert title in {"Home", *(f"Ordinary {n}" for n in range(ORDINARY_PAGES))}
    # A label naming a codec no page is in is ignored: the page decodes as what it is.
    assert {url: landed[url][2:4] for url in pages.charsets} == dict.fromkeys(pages.charsets, ("utf-8", TITLE))
    assert landed[pages.many_links][5] is True
    links = store.query("SELECT count(*), count(DISTINCT dst_url) FROM links WHERE src_url = ?", [pages.many_links])
    assert links == [(max_links, max_links)]
    assert landed[pages.bad_base][3:5] == ("Bad base", None)
    assert landed[pages.bad_redirect][:2] == (None, "bad redirect: Invalid IPv6 URL")
    assert landed[pages.deep][3] == "Deep"
    assert landed[pages.deep][6] == TOO_DEEP_ERROR
    pending = store.query("SELECT count(*) FROM frontier WHERE crawl_id = ? AND state IN ('discovered', 'queued')",
                          [crawl_id])
    assert pending == [(0,)]
