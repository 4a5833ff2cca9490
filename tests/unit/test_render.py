"""JavaScript rendering through the engine's crawl loop (no Dagster) on a single-page-app site whose
content and links come from a script: what each render mode finds, what lands in ``pages`` and the
archive, the network guard and robots.txt on the browser's own requests, politeness from the
server's log (over HTTP and HTTPS), and pages or browsers that fail alone. Needs Debian's
``chromium`` (``.ci/run`` installs it)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.extract.rules import parse_rules
from crawl_platform.extract.run import extract_crawl
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.netguard import NetworkGuard
from crawl_platform.pipeline.control import build_control
from crawl_platform.render import rendering_problem
from crawl_platform.render.step import ShardRenderer
from crawl_platform.store.records import view_name
from tests.conftest import requires_browser
from tests.sites.alert_receivers import LoopbackCertificate
from tests.sites.spa import RULES, SpaSite
from tests.unit.crawl_rows import crawl_loop, fetch_batch_while_commanding

AGENT = "render-test/1.0"
pytestmark = requires_browser


@pytest.fixture
def spa() -> Iterator[SpaSite]:
    with SpaSite(products=6) as site:
        yield site


@pytest.fixture
def traps() -> Iterator[SpaSite]:
    with SpaSite(products=2, traps=True) as site:
        yield site


def _renderer(store: Any, **options: Any) -> ShardRenderer:
    """Loopback's 127.0.0.1 allowed, nothing else of it (127.0.0.2 is 'a loopback port not allowed')."""
    return ShardRenderer(NetworkGuard(["127.0.0.1/32"]), archive=store.archive,
                         **{"browsers": 2, "timeout_s": 20.0, "host_delay_s": 0.0, **options})


def _crawl(settings: Any, bus: Any, store: Any, site: SpaSite, crawl_id: str, render: str, *,
           renderer: ShardRenderer | None = None, delay_s: float = 0.0, rules: str = "",
           during: Any = None, ca_file: str = "") -> ShardRenderer:
    """``ca_file``: what the fetcher (and, unless ``renderer`` is given, the browsers) trust besides their own."""
    renderer = renderer or _renderer(store, host_delay_s=delay_s, ca_file=ca_file)
    fetcher = Fetcher(AGENT, host_delay_s=delay_s, allowed_networks=["127.0.0.1/32"], ca_file=ca_file)
    loop = crawl_loop(settings, bus, store, fetcher, renderer=renderer)
    request = CrawlRequest(crawl_id, (site.base_url + "/",), 100, 5, "host", time.time(), render=render,  # type: ignore[arg-type]
                           screenshots=render == "always",
                           extract_rules=parse_rules(rules).to_json() if rules else "")
    loop.crawler.frontier.register(request)
    try:
        if during is not None:
            during(renderer)
        loop.run_until_idle(max_turns=200)
    finally:
        loop.crawler.close()
    return renderer


def _pages(store: Any, crawl_id: str) -> dict[str, tuple[Any, ...]]:
    rows = store.query("SELECT url, rendered, render_reason, render_error, render_refused FROM pages "
                       "WHERE crawl_id = ?", [crawl_id])
    return {r[0]: tuple(r[1:]) for r in rows}


def test_never_sees_the_app_shell_only(settings, bus, store, spa):
    _crawl(settings, bus, store, spa, "never", "never")

    assert _pages(store, "never") == {spa.base_url + "/": (None, None, None, None)}
    assert store.query("SELECT count(*) FROM links") == [(0,)]


def test_always_finds_every_page_and_its_extraction_rules_fill(settings, bus, store, spa):
    _crawl(settings, bus, store, spa, "always", "always", rules=RULES)

    pages = _pages(store, "always")
    assert sorted(pages) == sorted(spa.pages)
    assert set(pages.values()) == {(True, "always", None, None)}
    report = extract_crawl(store, "always")
    assert (report.records, report.page_errors) == (6, 0)
    rows = store.query(f"SELECT url, name, price FROM {view_name('always')} ORDER BY price")
    assert rows == [(f"{spa.base_url}/product/{n}", f"Product {n}", n * 10 + 0.5) for n in range(1, 7)]
    (title, text), = store.query("SELECT title, text FROM documents WHERE url = ?", [spa.base_url + "/product/3"])
    assert title == "Product 3"
    assert "Product 3 is a fine thing to own." in text
    # Each page asked for its script and its JSON through the browser, with the crawl's User-Agent.
    api = [s for s in spa.requests if s.path.startswith("/api/page")]
    assert len(api) == len(spa.pages)
    assert {s.headers["user-agent"] for s in spa.requests} == {AGENT}
    # The page itself was fetched once, over HTTP: the browser loaded it from that response.
    assert all(spa.request_count(url[len(spa.base_url):]) == 1 for url in spa.pages)


def test_the_archive_keeps_the_response_and_the_rendered_dom_pointing_at_it(settings, bus, store, spa):
    _crawl(settings, bus, store, spa, "archived", "always")

    (warc_file, offset, dom_file, dom_offset), = store.query(
        "SELECT warc_file, warc_offset, render_warc_file, render_warc_offset FROM pages WHERE url = ?",
        [spa.base_url + "/product/1"])
    with (store.archive_root / warc_file).open("rb") as stream:
        stream.seek(offset)
        response = next(iter(ArchiveIterator(stream)))
        assert response.rec_type == "response"
        assert b"product" not in response.content_stream().read()  # the app shell as the server sent it
    with (store.archive_root / dom_file).open("rb") as stream:
        stream.seek(dom_offset)
        records = iter(ArchiveIterator(stream))
        dom = next(records)
        dom_body = dom.content_stream().read()
        shot = next(records)
        shot_body = shot.content_stream().read()
    assert dom.rec_type == "conversion"
    assert dom.rec_headers.get_header("WARC-Refers-To") == response.rec_headers.get_header("WARC-Record-ID")
    assert b'<span class="price">10.5</span>' in dom_body
    assert (shot.rec_type, shot.rec_headers.get_header("Content-Type")) == ("resource", "image/png")
    assert shot_body.startswith(bytes([0x89]) + b"PNG")


def test_auto_renders_the_app_shell_then_its_host_from_then_on(settings, bus, store, spa):
    _crawl(settings, bus, store, spa, "auto", "auto", rules=RULES)

    pages = _pages(store, "auto")
    assert sorted(pages) == sorted(spa.pages)
    assert pages[spa.base_url + "/"][:2] == (True, "auto: app shell (0 characters of text, 1 scripts)")
    later = {reason for url, (_r, reason, *_rest) in pages.items() if url != spa.base_url + "/"}
    assert later == {"auto: its host needed rendering before"}
    assert store.query("SELECT origin, render_needed FROM hosts") == [(spa.base_url, True)]
    assert extract_crawl(store, "auto").records == 6


def test_auto_leaves_a_page_with_its_content_alone(settings, bus, store, site):
    """The demo site's pages are plain HTML: auto renders none of them and says why."""
    renderer = _renderer(store)
    fetcher = Fetcher(AGENT, host_delay_s=0.0, allowed_networks=["127.0.0.1/32"])
    loop = crawl_loop(settings, bus, store, fetcher, renderer=renderer)
    loop.crawler.frontier.register(CrawlRequest("plain", (site.base_url + "/",), 5, 1, "host", time.time(),
                                                render="auto"))
    try:
        loop.run_until_idle(max_turns=100)
    finally:
        loop.crawler.close()
    reasons = store.query("SELECT DISTINCT rendered, render_reason LIKE 'auto: not needed (%' FROM pages "
                          "WHERE status = 200")
    assert reasons == [(False, True)]
    assert renderer.pids() == []  # no browser was started


def test_the_guard_refuses_what_a_rendered_page_asks_for_and_the_crawl_goes_on(settings, bus, store, traps):
    _crawl(settings, bus, store, traps, "traps", "always", renderer=_renderer(store, timeout_s=12.0))

    pages = _pages(store, "traps")
    assert sorted(pages) == sorted(traps.pages)  # every page landed, the traps' too
    rendered, _reason, error, refused = pages[traps.base_url + "/trap/private"]
    secret = traps.secret.base_url
    assert (rendered, error) == (True, None)
    assert sorted(refused) == sorted([
        "http://169.254.169.254/latest/meta-data/: 169.254.169.254, a link-local address",
        f"{secret}/from-script: 127.0.0.2, a loopback address",
        f"{secret}/redirected: 127.0.0.2, a loopback address",  # where /go-private redirected to
        f"{traps.base_url}/private-api/orders: disallowed by robots.txt",
    ])
    assert traps.secret.requests == []
    assert traps.request_count("/go-private") == 1
    assert traps.request_count("/private-api/orders") == 0
    # A page whose network never settles, and one whose script never returns: each fails alone.
    for trap in ("/trap/spin", "/trap/busy"):
        rendered, _reason, error, _refused = pages[traps.base_url + trap]
        assert (rendered, error) == (False, "the page did not settle within 12 s"), trap
    assert all(pages[url][0] for url in traps.pages if "/trap/spin" not in url and "/trap/busy" not in url)


def test_a_browser_killed_mid_crawl_fails_its_page_only(settings, bus, store, spa):
    killed: list[int] = []

    def kill_the_first_browser(renderer: ShardRenderer) -> None:
        def watch() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                pids = renderer.pids()
                # The second page's script: the home page rendered, and a product page is loading.
                if pids and sum(s.path == "/app.js" for s in spa.requests) >= 2:
                    os.kill(pids[0], signal.SIGKILL)  # a browser this test's renderer started
                    killed.append(pids[0])
                time.sleep(0.01)

        threading.Thread(target=watch, daemon=True).start()

    renderer = _renderer(store, browsers=1)
    _crawl(settings, bus, store, spa, "killed", "always", renderer=renderer, during=kill_the_first_browser)

    assert killed
    pages = _pages(store, "killed")
    crashed = [url for url, (_r, _reason, error, _ref) in pages.items() if error and "crashed" in error]
    assert len(crashed) == 1, pages
    assert pages[crashed[0]][0] is False
    # The rest rendered in a fresh browser.
    assert sorted(pages) == sorted(spa.pages)
    assert sum(1 for rendered, *_rest in pages.values() if rendered) == len(spa.pages) - 1


@pytest.mark.timing
def test_rendered_pages_keep_the_host_gap_from_the_servers_log(settings, bus, store):
    delay = 0.3
    with SpaSite(products=3) as spa:
        _crawl(settings, bus, store, spa, "polite", "always", delay_s=delay)
        seen = sorted(spa.requests, key=lambda s: s.started_at)
    assert len(seen) == 1 + 4 * 3  # robots.txt, and each page, its script and its JSON
    gaps = [later.started_at - earlier.finished_at for earlier, later in pairwise(seen)]
    assert min(gaps) >= delay - 0.02, gaps
    overlapping = [(a.path, b.path) for a, b in pairwise(seen) if b.started_at < a.finished_at]
    assert overlapping == []


def test_over_https_robots_txt_refuses_a_sub_request_before_it_leaves_and_the_crawl_goes_on(
        settings, bus, store, tmp_path):
    """The trap page asks its own host and another one (its robots.txt read the first time) for a
    disallowed path and, of the other host, for an allowed one."""
    certificate = LoopbackCertificate(tmp_path)
    with SpaSite(products=0, tls=certificate) as other, \
            SpaSite(products=2, robots_trap=True, elsewhere=other.base_url, tls=certificate) as spa:
        _crawl(settings, bus, store, spa, "https", "always", ca_file=str(certificate.ca_file))
        seen = [s.path for s in spa.requests]
        seen_elsewhere = [s.path for s in other.requests]
    assert spa.base_url.startswith("https://")
    pages = _pages(store, "https")
    assert sorted(pages) == sorted(spa.pages)
    trap = spa.base_url + "/trap/robots"
    assert pages[trap][:3] == (True, "always", None)
    assert sorted(pages[trap][3]) == sorted([f"{spa.base_url}/private-api/stock: disallowed by robots.txt",
                                             f"{other.base_url}/private-api/stock: disallowed by robots.txt"])
    assert seen_elsewhere == ["/robots.txt", "/app.js"]
    others = {url: row for url, row in pages.items() if url != trap}
    assert others == dict.fromkeys(others, (True, "always", None, None))
    assert not [path for path in seen if path.startswith("/private-api/")]  # refused inside the browser
    # The page went on: its script's own request after the refused one built it.
    assert store.query("SELECT title FROM documents WHERE url = ?", [trap]) == [("/trap/robots",)]
    assert sum(path.startswith("/api/page") for path in seen) == len(spa.pages)


def test_over_https_the_browser_checks_certificates_against_the_crawls_cas(settings, bus, store, tmp_path):
    """The fetcher trusts the test CA, the browsers do not: the page is fetched, and the browser
    refuses the server's certificate, so its script is never asked for."""
    certificate = LoopbackCertificate(tmp_path)
    with SpaSite(products=1, tls=certificate) as spa:
        _crawl(settings, bus, store, spa, "untrusted", "always", renderer=_renderer(store),
               ca_file=str(certificate.ca_file))
    assert spa.request_count("/") == 1
    assert spa.request_count("/app.js") == 0
    assert store.query("SELECT count(*) FROM links") == [(0,)]


@pytest.mark.timing
def test_over_https_a_pages_requests_keep_the_host_gap_from_the_servers_log(settings, bus, store, tmp_path):
    """Over HTTPS the browser reuses one tunnel for a page's requests: each is paced all the same."""
    delay = 0.3
    certificate = LoopbackCertificate(tmp_path)
    with SpaSite(products=3, tls=certificate) as spa:
        _crawl(settings, bus, store, spa, "polite-https", "always", delay_s=delay, ca_file=str(certificate.ca_file))
        seen = sorted(spa.requests, key=lambda s: s.started_at)
    assert len(seen) == 1 + 4 * 3  # robots.txt, and each page, its script and its JSON
    gaps = [later.started_at - earlier.finished_at for earlier, later in pairwise(seen)]
    assert min(gaps) >= delay - 0.02, gaps
    overlapping = [(a.path, b.path) for a, b in pairwise(seen) if b.started_at < a.finished_at]
    assert overlapping == []


def test_a_crawl_asking_for_rendering_without_a_browser_gets_one_line(tmp_path: Path):
    assert rendering_problem(str(tmp_path / "no-chromium")) == (
        f"rendering needs a browser (CRAWL_BROWSER_PATH {str(tmp_path / 'no-chromium')!r} is not an executable): "
        "install Chromium (Debian: apt-get install chromium) or set CRAWL_BROWSER_PATH")


def test_a_pause_while_rendering_holds_the_pages_not_yet_loaded_and_resume_renders_them_once(settings, bus, store):
    """The render step asks its watch before each page: once it has read the pause from the lake,
    no browser loads a page of the paused crawl; those pages land ``skipped`` (their HTTP fetch
    dropped, their rows ``paused``), and after the resume each is fetched and rendered once."""
    with SpaSite(products=10) as spa:
        renderer = _renderer(store, host_delay_s=0.4)  # a gap between two page loads of the host
        fetcher = Fetcher(AGENT, host_delay_s=0.0, allowed_networks=["127.0.0.1/32"])
        loop = crawl_loop(settings, bus, store, fetcher, renderer=renderer)
        crawler = loop.crawler
        crawler.frontier.register(CrawlRequest("held", tuple(spa.pages), 100, 0, "host", time.time(),  # type: ignore[arg-type]
                                               render="always"))
        try:
            # Paused once the first page is rendered (its script asked for its content).
            batch = fetch_batch_while_commanding(
                crawler, bus, "held", "pause", lambda: any(s.path.startswith("/api/page") for s in spa.requests),
                timeout_s=120)
            assert len(batch.prepared.requests) == len(spa.pages)
            held = set(batch.shard.held)
            assert held
            assert batch.report.held == len(held)
            assert not held & set(_pages(store, "held"))  # nothing of them landed
            rows = dict(store.query("SELECT url, state FROM frontier WHERE crawl_id = 'held'"))
            assert {rows[u] for u in held} == {"paused"}
            outcomes = dict(store.query("SELECT url, outcome FROM batch_items WHERE crawl_id = 'held'"))
            assert {outcomes[u] for u in held} == {"skipped"}
            rendered = {s.path.split("path=", 1)[1] for s in spa.requests if s.path.startswith("/api/page")}
            assert not {u[len(spa.base_url):] for u in held} & {unquote(p) for p in rendered}  # never loaded

            crawler.frontier.control(build_control("held", "resume"))
            loop.run_until_idle(max_turns=200)
        finally:
            crawler.close()
        pages = _pages(store, "held")
        assert sorted(pages) == sorted(spa.pages)
        assert store.query("SELECT count(*) FROM pages WHERE crawl_id = 'held'") == [(len(spa.pages),)]
        assert {v[0] for v in pages.values()} == {True}  # every page rendered, the held ones after the resume
        api = [unquote(s.path.split("path=", 1)[1]) for s in spa.requests if s.path.startswith("/api/page")]
        assert sorted(api) == sorted(u[len(spa.base_url):] or "/" for u in spa.pages)  # each rendered once
