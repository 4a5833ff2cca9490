"""Per-crawl scope and trap defences: what a crawl admits into its frontier, end to end in DuckDB."""

import logging

import pytest

from crawl_platform.bus.messages import CrawlRequest, FrontierURL, decode_crawl_request, encode
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import ParsedPage
from crawl_platform.patterns import PatternError
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform.urls import CrawlScope, canonicalize, trap_reason
from tests.unit.crawl_rows import fetch_result as make_result

SEED = "http://shop.example/"


@pytest.mark.parametrize(("url", "reason"), [
    ("http://a.example/a/b/a/b/a/b", "path segments repeat: a/b"),
    ("http://a.example/x/x/x/y", "path segments repeat: x"),
    ("http://a.example/1/2/3/1/2/3/1/2/3", "path segments repeat: 1/2/3"),
    ("http://a.example/?" + "&".join(f"p{i}=1" for i in range(17)), "more than 16 query parameters"),
    ("http://a.example/" + "/".join(f"s{i}" for i in range(33)), "more than 32 path segments"),
])
def test_trap_urls_are_named(url, reason):
    assert trap_reason(url) == reason


@pytest.mark.parametrize("url", ["http://a.example/cal/2026/11", "http://a.example/a/b/a/b",
                                 "http://a.example/?" + "&".join(f"p{i}=1" for i in range(16))])
def test_ordinary_urls_are_not_traps(url):
    assert trap_reason(url) is None


def test_session_ids_are_stripped_so_revisits_dedup():
    assert canonicalize("http://a.example/p;jsessionid=AB12?x=1&PHPSESSID=9&sid=3") == "http://a.example/p?x=1"
    assert canonicalize("http://a.example/p?sessionid=1") == canonicalize("http://a.example/p?sessionid=2")


def test_allow_and_deny_patterns_decide_after_the_domain():
    scope = CrawlScope.for_seeds("domain", [SEED], allow=[r"/(shop|blog)/"], deny=[r"\.pdf$", r"/blog/drafts/"])
    assert scope.rejection("http://www.shop.example/shop/item") is None
    assert scope.rejection("http://shop.example/about") == "matches no allow pattern"
    assert scope.rejection("http://shop.example/shop/manual.pdf") == "matches a deny pattern"
    assert scope.rejection("http://shop.example/blog/drafts/x") == "matches a deny pattern"
    assert scope.rejection("http://other.example/shop/") == "outside domain scope"


def test_request_fields_round_trip_and_old_messages_still_decode():
    request = build_crawl_request([SEED], crawl_id="c", allow=["/shop/"], deny=["x"], max_pages_per_host=5,
                                  user_agent="MyBot/2", use_sitemaps=True)
    assert decode_crawl_request(encode(request)) == request
    v1_without_new_fields = (b'{"type":"crawl_request","v":1,"crawl_id":"c","seeds":["http://a/"],'
                             b'"max_pages":3,"max_depth":1,"scope":"host","submitted_at":1.0}')
    old = decode_crawl_request(v1_without_new_fields)
    assert (old.allow_patterns, old.max_pages_per_host, old.user_agent, old.use_sitemaps) == ((), 0, "", False)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"allow": ["("]}, "pattern '(' is not a valid RE2 regular expression: missing ): ("),
    ({"deny": ["[a-"]}, "pattern '[a-' is not a valid RE2 regular expression: missing ]: [a-"),
    # Back-references and look-around need a backtracking matcher: refused when the crawl is submitted.
    ({"deny": [r"(a+)\1"]}, r"pattern '(a+)\\1' is not a valid RE2 regular expression: invalid escape sequence: \1"),
    ({"allow": ["/(?!private)"]}, "pattern '/(?!private)' is not a valid RE2 regular expression: invalid perl "
                                  "operator: (?!"),
    ({"allow": ["a" * 1001]}, "is longer than 1000 characters"),
    ({"deny": ["x"] * 101}, "deny patterns: at most 100, got 101"),
    ({"max_pages_per_host": -1}, "max-pages-per-host must be between 0"),
    ({"user_agent": "a\nb"}, "user agent must be one line"),
])
def test_bad_request_fields_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(PatternError if "pattern" in message else ValueError) as raised:
        build_crawl_request([SEED], **kwargs)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def _land_links(store, crawl_id, src, links):
    """Land one fetched page of ``crawl_id`` whose links are ``links`` (batch 'b-<src>')."""
    batch = f"b-{src}"
    items = [FrontierURL(crawl_id, src, 0)]
    land_batch(store, batch, items, {src: make_result(src, body=src.encode())},
               {src: ParsedPage("t", "text", tuple((u, "a") for u in links))})
    return batch


def test_expand_applies_scope_patterns_traps_and_the_per_host_cap(store, bus):
    frontier = Frontier(store, bus)
    request = CrawlRequest("c", (SEED,), 100, 5, "any", 1.0, allow_patterns=(), deny_patterns=(r"/logout",),
                           max_pages_per_host=3)
    frontier.register(request)
    links = ([f"http://shop.example/p{i}" for i in range(5)]
             + [f"http://cdn.example/img{i}" for i in range(2)]
             + ["http://shop.example/logout", "http://shop.example/a/b/a/b/a/b"])
    growth = frontier.expand(_land_links(store, "c", SEED, links))
    admitted = {r[0] for r in store.query("SELECT url FROM frontier WHERE crawl_id = 'c'")}
    # The seed counts toward its host's cap of 3: two more shop pages, both cdn pages.
    assert admitted == {SEED, "http://shop.example/p0", "http://shop.example/p1",
                        "http://cdn.example/img0", "http://cdn.example/img1"}
    assert growth.admitted == 4
    assert growth.published == 4


def test_a_pattern_is_matched_in_time_linear_in_the_url():
    # (a+)+b backtracks exponentially in Python's re on a run of a's with no b.
    scope = CrawlScope.for_seeds("any", [SEED], deny=[r"(a+)+b"])
    assert scope.rejection("http://shop.example/" + "a" * 2000) is None


def test_a_stored_pattern_re2_refuses_admits_nothing_for_its_crawl_only(store, bus, caplog):
    frontier = Frontier(store, bus)
    for crawl_id in ("good", "old"):
        frontier.register(CrawlRequest(crawl_id, (SEED,), 100, 5, "host", 1.0, deny_patterns=(r"/logout",)))
    # As a lake holds a crawl submitted when patterns were Python's re: a look-ahead.
    with store.write() as con:
        con.execute("UPDATE crawls SET deny_patterns = ['/(?!public)'] WHERE crawl_id = 'old'")
    links = ["http://shop.example/public/a", "http://shop.example/p1", "http://shop.example/logout"]
    items = [FrontierURL("good", SEED, 0), FrontierURL("old", SEED, 0)]
    land_batch(store, "b", items, {SEED: make_result(SEED, body=b"x")},
               {SEED: ParsedPage("t", "text", tuple((u, "a") for u in links))})
    with caplog.at_level(logging.WARNING, logger="crawl_platform.urls"):
        frontier.expand("b")
    admitted = store.query("SELECT crawl_id, url FROM frontier WHERE url <> ? ORDER BY ALL", [SEED])
    # Dropping the deny pattern would have widened the old crawl to every link: it admits none.
    assert admitted == [("good", "http://shop.example/p1"), ("good", "http://shop.example/public/a")]
    reason = ("the crawl admits no link: pattern '/(?!public)' is not a valid RE2 regular expression: "
              "invalid perl operator: (?!")
    assert f"crawl old: {reason}" in caplog.messages
    scope = CrawlScope.from_row("host", [SEED], None, ["/(?!public)"])
    assert scope.rejection("http://shop.example/p1") == reason
