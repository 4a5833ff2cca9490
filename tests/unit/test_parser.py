"""HTML extraction (crawl_platform.parse.html): every engine, on the demo site, a real site and awkward pages."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.parse.html import parse_html

ENGINES = ["selectolax", "lxml", "bs4"]
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")  # Debian's python3.11-doc: a real site nobody here wrote
ORIGIN = "http://127.0.0.1:0"  # what DemoSite embeds in absolute links before it is served
HTML_UTF8 = "text/html; charset=utf-8"


@pytest.fixture(scope="module")
def demo() -> DemoSite:
    return DemoSite(120, seed=7)


def _expected_links(demo: DemoSite, path: str) -> list[str]:
    """Independent reference: the page's hrefs resolved, fragment-free, crawlable, first occurrence kept
    (a bare ``#fragment`` points back at the page itself and is no link)."""
    page = demo.page(path)
    assert page is not None
    out: list[str] = []
    for href in page.links:
        if href.startswith("#"):
            continue
        url = urldefrag(urljoin(ORIGIN + path, href))[0]
        if url.startswith("http") and url not in out:
            out.append(url)
    return out


def test_engines_agree_on_every_demo_page(demo):
    for path in demo.paths():
        body = demo.body(path)
        by_lxml = parse_html(body, ORIGIN + path, HTML_UTF8, "lxml")
        assert parse_html(body, ORIGIN + path, HTML_UTF8, "bs4") == by_lxml, path
        assert parse_html(body, ORIGIN + path, HTML_UTF8, "selectolax") == by_lxml, path


@pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="needs Debian's python3.11-doc (make test installs it)")
def test_selectolax_gives_lxmls_title_text_and_links_on_a_real_site():
    """The default engine is chosen over lxml for speed (benchmarks/parse_engines.py): on every page
    of the Python docs, from the huge indexes to the small ones, it must give exactly lxml's
    title, text and links (main content off: it is the same step whatever the engine)."""
    pages = sorted(PYTHON_DOCS.rglob("*.html"))
    assert len(pages) > 500
    for page in pages:
        url = "http://docs.test/" + page.relative_to(PYTHON_DOCS).as_posix()
        body = page.read_bytes()
        assert parse_html(body, url, HTML_UTF8, "selectolax", main_content=False) == \
            parse_html(body, url, HTML_UTF8, "lxml", main_content=False), url


@pytest.mark.parametrize("engine", ENGINES)
def test_demo_pages_give_title_text_and_links(demo, engine):
    for path in demo.paths():
        page = demo.page(path)
        parsed = parse_html(demo.body(path), ORIGIN + path, HTML_UTF8, engine)
        assert parsed.title == page.title
        assert parsed.text.startswith(page.title)  # the <h1>
        assert "Section 1" in parsed.text
        assert "<" not in parsed.text
        assert [url for url, _ in parsed.links] == _expected_links(demo, path), path


@pytest.mark.parametrize("engine", ENGINES)
def test_links_are_canonical_deduplicated_and_fragment_free(demo, engine):
    for path in demo.paths():
        urls = [url for url, _ in parse_html(demo.body(path), ORIGIN + path, HTML_UTF8, engine).links]
        assert len(urls) == len(set(urls))
        assert not any("#" in url for url in urls)
        assert not any(url.startswith(("mailto:", "javascript:")) for url in urls)


@pytest.mark.parametrize("engine", ENGINES)
def test_anchor_text_is_kept_with_each_link(demo, engine):
    parsed = parse_html(demo.body("/"), ORIGIN + "/", HTML_UTF8, engine)
    anchors = dict(parsed.links)
    for k in range(4):  # the home page links /page/0..3 with their titles
        assert anchors[f"{ORIGIN}/page/{k}"] == demo.page(f"/page/{k}").title


@pytest.mark.parametrize("engine", ENGINES)
def test_scripts_styles_and_hidden_markup_are_not_text(engine):
    body = b"""<html><head><title>T</title><style>.x { color: red }</style>
    <script>var secret = "<a href='/from-script'>";</script></head>
    <body><p>Visible</p><script>alert("nope")</script><noscript>enable js</noscript>
    <template><p>template text</p></template><!-- a comment --><p>After</p></body></html>"""
    parsed = parse_html(body, "http://h.example/", "text/html", engine)
    assert parsed.title == "T"
    assert parsed.text == "Visible After"
    assert parsed.links == ()


@pytest.mark.parametrize("engine", ENGINES)
def test_base_href_is_respected(engine):
    body = b"""<html><head><base href="/docs/v2/"></head><body>
    <a href="intro">Intro</a><a href="../v1/old">Old</a><a href="/abs">Abs</a>
    <a href="http://other.example/x">Other</a></body></html>"""
    parsed = parse_html(body, "http://h.example/a/b", "text/html", engine)
    assert [url for url, _ in parsed.links] == [
        "http://h.example/docs/v2/intro",
        "http://h.example/docs/v1/old",
        "http://h.example/abs",
        "http://other.example/x",
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_links_are_deduplicated_after_canonicalisation(engine):
    body = b"""<body><a href="/a#one">First</a><a href="/a#two">Second</a>
    <a href=" /b?y=2&amp;x=1 ">B</a><a href="/b?x=1&amp;y=2">B again</a><a href="/A">Upper</a>
    <a>no href</a><a href="">empty</a><a href="mailto:a@b.example">mail</a>
    <a href="javascript:void(0)">js</a><a href="#top">top</a><a href="ftp://f.example/">ftp</a></body>"""
    parsed = parse_html(body, "http://h.example/p", "text/html", engine)
    assert parsed.links == (
        ("http://h.example/a", "First"),  # the first anchor text wins
        ("http://h.example/b?x=1&y=2", "B"),
        ("http://h.example/A", "Upper"),  # paths are case-sensitive
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_an_href_repeated_with_other_fragments_keeps_its_first_anchor(engine):
    """An index page links one page many times, by fragment: one link, with the first anchor's
    text as the page showed it (a script inside an anchor is not text, but the anchor is read
    before scripts are removed, as it always was)."""
    body = b"""<body><a href="x.html#a">First <b>bold</b></a><p>text <i>inline</i>tail</p>
    <a href=" x.html#b ">Second</a><a href="x.html">Third</a><a href="#only">self</a>
    <a href="y.html#z">Why<!-- note --></a><a href="y.html#q">Again</a></body>"""
    parsed = parse_html(body, "http://h.example/dir/p.html", "text/html", engine)
    assert parsed.links == (
        ("http://h.example/dir/x.html", "First bold"),
        ("http://h.example/dir/y.html", "Why"),
    )
    assert parsed.text == "First bold text inline tail Second Third self Why Again"


@pytest.mark.parametrize("engine", ENGINES)
def test_charset_from_the_content_type(engine):
    html = "<html><head><title>Привет мир</title></head><body><p>Съешь же ещё</p>" \
           '<a href="/путь">ссылка</a></body></html>'
    parsed = parse_html(html.encode("windows-1251"), "http://h.example/", "text/html; charset=windows-1251",
                        engine)
    assert parsed.title == "Привет мир"
    assert parsed.text == "Съешь же ещё ссылка"
    assert parsed.links == (("http://h.example/%D0%BF%D1%83%D1%82%D1%8C", "ссылка"),)


@pytest.mark.parametrize("engine", ENGINES)
def test_charset_from_a_meta_tag(engine):
    html = '<html><head><meta charset="windows-1251"><title>Привет</title></head><body>Текст</body></html>'
    parsed = parse_html(html.encode("windows-1251"), "http://h.example/", "text/html", engine)
    assert (parsed.title, parsed.text) == ("Привет", "Текст")


@pytest.mark.parametrize("engine", ENGINES)
def test_unknown_charset_label_still_parses(engine):
    parsed = parse_html(b"<title>x</title><p>hello</p>", "http://h.example/", "text/html; charset=no-such",
                        engine)
    assert (parsed.title, parsed.text) == ("x", "hello")


def test_quoted_charset_in_the_content_type():
    html = "<html><head><title>Привет мир</title></head><body><p>Съешь же ещё</p></body></html>"
    parsed = parse_html(html.encode("windows-1251"), "http://h.example/",
                        'text/html; charset="windows-1251"', "lxml")
    assert parsed.title == "Привет мир"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("body", [b"", b"   \n\t "])
def test_empty_body(engine, body):
    parsed = parse_html(body, "http://h.example/", "text/html", engine)
    assert (parsed.title, parsed.text, parsed.links) == (None, "", ())


@pytest.mark.parametrize("engine", ENGINES)
def test_blank_title_is_none_and_whitespace_is_squashed(engine):
    body = b"<html><head><title>  \n </title></head><body><a href='/n'><b>Bold</b>\n\n  <i>it</i></a></body>"
    parsed = parse_html(body, "http://h.example/", "text/html", engine)
    assert parsed.title is None
    assert parsed.text == "Bold it"
    assert parsed.links == (("http://h.example/n", "Bold it"),)


@pytest.mark.parametrize("engine", ENGINES)
def test_links_resolve_against_the_final_url_of_a_redirect(demo, engine):
    # /old-home redirects to /page/1: relative links there must resolve against /page/1.
    parsed = parse_html(demo.body("/page/1"), ORIGIN + "/page/1", HTML_UTF8, engine)
    assert [url for url, _ in parsed.links] == _expected_links(demo, "/page/1")


def test_control_characters_are_removed_and_nothing_else():
    """The characters an lxml tree refuses (C0 controls but tab, newline, carriage return) go, as
    the translate table that removed them before; text around them and other characters stay."""
    import random  # noqa: PLC0415

    from crawl_platform.parse.html import strip_control  # noqa: PLC0415

    table = dict.fromkeys([*range(9), 11, 12, *range(14, 32)])
    rng = random.Random(7)
    for _ in range(2000):
        length = rng.randint(0, 80)
        # ASCII, the BMP, lone surrogates (which decoding never makes, but a str may hold) and beyond
        text = "".join(chr(rng.choice([rng.randint(0, 40), rng.randint(32, 0x3000), rng.randint(0xD800, 0xDFFF),
                                       rng.randint(0x10000, 0x10FFFF)])) for _ in range(length))
        assert strip_control(text) == text.translate(table)
    page = parse_html(b"<html><title>A\x01B\x1f</title><body><p>one\x0btwo\tthree</p></body></html>",
                      "http://example.com/")
    assert page.title == "AB"
    assert page.text == "onetwo three"


@pytest.mark.timeout(60)  # lexbor alone takes minutes on this page (quadratic in <div> nesting)
@pytest.mark.parametrize("main_content", [True, False])
def test_a_page_nested_too_deep_for_lexbor_is_parsed_by_lxml(main_content):
    """200,000 nested <div>s: lexbor's parse would take about two minutes, so the page goes to
    lxml (which keeps the first 2,048 levels), with or without the main-content step's check."""
    hostile = b"<html><head><title>Deep</title></head><body><a href='/top'>top</a>" + \
        b"<div>x" * 200_000 + b"</div>" * 200_000 + b"</body></html>"
    parsed = parse_html(hostile, "http://h.example/", "text/html", main_content=main_content)
    assert parsed.title == "Deep"
    assert parsed.links == (("http://h.example/top", "top"),)
    assert parsed.text.startswith("top x x x")


@pytest.mark.parametrize("markup", [
    b"<p>unclosed <b>bold <i>it", b'<?xml version="1.0" encoding="utf-8"?><html><title>X</title><body>x</body></html>',
    b"<!-- only a comment -->", b"\x00\x01<title>n\x00ul</title>text", b"\xff\xfe\xfa broken <a href=/a>a</a>",
    b"before<html><body>in</body></html>after", b"<a href=/1>one<a href=/2>two</a></a>",
    b"<table><a href=/t>t</a><tr><td>cell</td></tr></table>", b"<body><svg><title>svg</title><a href=/s>s</a></svg>",
    b"<frameset><frame src=/f></frameset>", b"<textarea><a href=/ta>x</a></textarea>",
    b"<head><title>T</title><a href=/inhead>h</a></head>", b"<p>a<br>b&nbsp;c&amp;d</p>",
])
def test_selectolax_and_lxml_agree_on_broken_markup(markup):
    """HTML5 (lexbor) and libxml2 recover from these the same way. Where they differ it is rare and
    HTML5 is the standard: a second <title> with no <body> is no body text, and a <noscript> at the
    very top closes before the link in it (the link is found either way)."""
    assert parse_html(markup, "http://h.example/", "text/html", "selectolax") == \
        parse_html(markup, "http://h.example/", "text/html", "lxml")


def many_links(count: int) -> bytes:
    """A page of ``count`` distinct links (300,000 of them make about 6 MB)."""
    anchors = "".join(f"<a href=/l/{i}>{i}</a> " for i in range(count))
    return f"<html><head><title>Many</title></head><body>{anchors}</body></html>".encode()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_page_keeps_its_first_max_links_links_and_says_it_had_more(engine):
    exactly = parse_html(many_links(50), "http://h.example/", "text/html", engine, max_links=50)
    assert (len(exactly.links), exactly.links_truncated) == (50, False)
    cut = parse_html(many_links(51), "http://h.example/", "text/html", engine, max_links=50)
    assert cut.links == exactly.links
    assert cut.links_truncated
    assert cut.text == exactly.text + " 50"  # the text is the whole page's


@pytest.mark.timeout(60)
def test_a_page_of_300000_links_is_cut_at_the_setting_and_read_no_further():
    from crawl_platform.config import Settings  # noqa: PLC0415

    body = many_links(300_000)
    assert 5_000_000 < len(body) < Settings().max_body_bytes
    cap = Settings().max_links_per_page
    parsed = parse_html(body, "http://h.example/", "text/html")
    assert (parsed.links[0], parsed.links[-1]) == (("http://h.example/l/0", "0"),
                                                    (f"http://h.example/l/{cap - 1}", str(cap - 1)))
    assert (len(parsed.links), parsed.links_truncated, parsed.error) == (cap, True, None)


def test_hrefs_that_lead_nowhere_stop_the_link_collection_too():
    """Distinct hrefs that are no link (``javascript:``) cost a resolution each: past 4 x the cap
    the page is read no further, and it counts as cut."""
    anchors = "".join(f"<a href='javascript:f({i})'>{i}</a>" for i in range(500))
    parsed = parse_html(f"<body>{anchors}<a href=/late>late</a></body>".encode(), "http://h.example/",
                        "text/html", max_links=100)
    assert (parsed.links, parsed.links_truncated) == ((), True)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_base_href_that_is_no_url_is_ignored_and_the_page_keeps_its_links(engine):
    body = b"<html><head><base href='http://['><title>T</title></head><body><p>text</p><a href=/x>x</a></body></html>"
    parsed = parse_html(body, "http://h.example/a/", "text/html", engine)
    assert (parsed.title, parsed.text, parsed.links, parsed.error) == ("T", "text x", (("http://h.example/x", "x"),),
                                                                        None)


def test_a_page_the_parser_fails_on_comes_back_empty_with_its_error():
    """Here a body that is no bytes: whatever fails inside, the caller gets the page with the error."""
    parsed = parse_html("<title>not bytes</title>", "http://h.example/", "text/html")  # type: ignore[arg-type]
    assert (parsed.title, parsed.text, parsed.links, parsed.main) == (None, "", (), None)
    assert parsed.error is not None
    assert parsed.error.startswith("TypeError: ")


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=4096) | st.text(max_size=2000).map(lambda t: t.encode("utf-8", "surrogatepass")),
       label=st.sampled_from(["utf-8", "idna", "punycode", "undefined", "utf-16", "x-junk", ""]),
       engine=st.sampled_from(ENGINES))
def test_any_bytes_parse_without_an_error(body, label, engine):
    parsed = parse_html(b"<html><base href='http://[::1'>" + body, "http://h.example/", f"text/html; charset={label}",
                        engine, max_links=20)
    assert parsed.error is None
    assert len(parsed.links) <= 20
