"""Main content on the crawl path (crawl_platform.parse.main_text through parse_html and landing):
the Python documentation's pages (Debian's python3.11-doc, a site nobody here wrote) keep their
body and lose navigation and footer, with language and extractor; broken and non-HTML pages in
the same batch land without stopping it, and an input the extractor refuses is recorded as an
error on its row."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.parse.html import parse_html
from crawl_platform.parse.main_text import MAX_DEPTH, extract_main_content
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.shard import ShardFetcher
from tests.sites.hostile import CP1251_TEXT, Reply
from tests.unit.conftest import loopback_fetcher

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
EXTRACTOR = f"resiliparse {version('resiliparse')}"
# On every page of the Python docs, outside the content: the navigation bars, sidebar and footer.
BOILERPLATE = ("Navigation", "Previous topic", "Next topic", "This Page", "Report a Bug", "Show Source",
               "modules |", "Copyright", "Python Software Foundation", "Found a bug")
DOC_PAGES = {
    "library/functions.html": ("Built-in Functions\n\nThe Python interpreter has a number of functions and "
                               "types built into it that are always available."),
    "library/json.html": "json — JSON encoder and decoder",
    "tutorial/introduction.html": "3. An Informal Introduction to Python",
}

pytestmark = pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="Debian's python3.11-doc is not installed")


@pytest.mark.parametrize(("page", "opening"), DOC_PAGES.items())
def test_a_python_docs_page_keeps_its_content_and_loses_navigation_and_footer(page, opening):
    parsed = parse_html((PYTHON_DOCS / page).read_bytes(), f"http://docs.test/{page}")
    main = parsed.main
    assert main is not None
    assert main.text is not None
    assert main.text.startswith(opening)
    assert [s for s in BOILERPLATE if s in parsed.text] == list(BOILERPLATE)  # the whole page's text has them
    assert [s for s in BOILERPLATE if s in main.text] == []
    assert (main.language, main.extractor, main.error) == ("en", EXTRACTOR, None)
    assert main.simhash is not None
    assert 0 <= main.simhash < 2**64
    assert len(main.text) < len(parsed.text)


def test_language_of_a_russian_page_and_no_language_without_text():
    page = f"<html><body><nav>Главная</nav><article><p>{CP1251_TEXT}. {CP1251_TEXT}.</p></article></body></html>"
    main = parse_html(page.encode("cp1251"), "http://h/", "text/html; charset=windows-1251").main
    assert main is not None
    assert main.language == "ru"
    empty = parse_html(b"<html><body><script>var x = 1;</script></body></html>", "http://h/").main
    assert empty is not None
    assert (empty.text, empty.language, empty.simhash, empty.error) == ("", None, None, None)
    assert parse_html(b"<p>text</p>", "http://h/", main_content=False).main is None


def test_an_input_the_extractor_refuses_is_an_error_note_not_an_exception():
    main = extract_main_content("<p>half a surrogate \ud800 here</p>")  # lexbor needs encodable UTF-8
    assert (main.text, main.language, main.simhash, main.extractor) == (None, None, None, EXTRACTOR)
    assert main.error == ("UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 20: "
                          "surrogates not allowed")


def test_docs_broken_and_non_html_pages_land_in_one_batch_with_their_main_content(hostile, store):
    for page in DOC_PAGES:
        hostile.static[f"/docs/{page}"] = Reply(200, (PYTHON_DOCS / page).read_bytes())
    hostile.static["/binary"] = Reply(200, bytes(range(256)) * 64, {"Content-Type": "text/html"})  # not HTML at all
    hostile.static["/no-text"] = Reply(200, b"<html><body><script>start()</script></body></html>")
    paths = [f"/docs/{p}" for p in DOC_PAGES] + ["/malformed", "/binary", "/no-text", "/pdf"]
    urls = [hostile.url(p) for p in paths]
    fetcher = loopback_fetcher(max_body_bytes=80 * 1024 * 1024)
    results = fetcher.fetch_all(urls)
    parsed = {u: parse_html(r.body, r.final_url, r.content_type) for u, r in results.items() if r.is_html}
    landed = land_batch(store, "b1", [FrontierURL("c1", u, 0) for u in urls], results, parsed)
    assert landed.new_versions == len(paths)
    rows = {url[len(hostile.base_url):]: rest for url, *rest in store.query(
        "SELECT url, language, simhash IS NOT NULL, extractor, main_text_error, main_text FROM documents")}
    assert set(rows) == set(paths) - {"/pdf"}  # the PDF lands in pages only: no document
    for page, opening in DOC_PAGES.items():
        language, has_hash, extractor, error, main_text = rows[f"/docs/{page}"]
        assert (language, has_hash, extractor, error) == ("en", True, EXTRACTOR, None)
        assert main_text.startswith(opening)
        assert "Report a Bug" not in main_text
    assert rows["/malformed"][4].startswith("Unclosed")
    assert rows["/no-text"] == [None, False, EXTRACTOR, None, ""]
    assert rows["/binary"][2:4] == [EXTRACTOR, None]
    (simhash_type,) = store.query("SELECT typeof(simhash) FROM documents LIMIT 1")[0]
    assert simhash_type == "UBIGINT"


def test_crawl_main_content_false_takes_it_off_the_parse_step(hostile, store, monkeypatch):
    monkeypatch.setenv("CRAWL_MAIN_CONTENT", "false")
    assert Settings().main_content is False
    hostile.static["/docs/json"] = Reply(200, (PYTHON_DOCS / "library/json.html").read_bytes())
    url = hostile.url("/docs/json")
    shard = ShardFetcher(loopback_fetcher(), "lxml", None, main_content=Settings().main_content).fetch(
        [FetchRequest(url)], [])
    assert shard.parsed[url].main is None
    assert (shard.parsed[url].title or "").startswith("json — JSON encoder and decoder")
    land_batch(store, "b1", [FrontierURL("c1", url, 0)], shard.results, shard.parsed)
    assert store.query("SELECT main_text, language, simhash, extractor, main_text_error, length(text) > 0 "
                       "FROM documents") == [(None, None, None, None, None, True)]


def test_a_page_nested_deeper_than_the_limit_is_skipped_with_a_note_and_a_deep_real_one_is_not():
    hostile_page = b"<html><body>" + b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000 + b"</body></html>"
    main = parse_html(hostile_page, "http://h/deep").main
    assert main is not None
    assert (main.text, main.simhash, main.error) == (None, None, f"skipped: elements nested more than {MAX_DEPTH} deep")
    nested = b"<div>" * 100 + b"<p>" + b"Words of a deeply nested but ordinary page. " * 500 + b"</p>" + b"</div>" * 100
    ordinary = parse_html(b"<html><body>" + nested + b"</body></html>", "http://h/nested").main
    assert ordinary is not None
    assert ordinary.error is None
    assert (ordinary.text or "").startswith("Words of a deeply nested but ordinary page.")
