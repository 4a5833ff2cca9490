"""Per-crawl scope and trap defences: what a crawl admits into its frontier, end to end in DuckDB."""

import pytest

from crawl_platform.bus.messages import CrawlRequest, FrontierURL, decode_crawl_request, encode
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.parse.html import ParsedPage
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform.store.landing import land_batch
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
    ({"allow": ["("]}, "is not a valid regular expression"),
    ({"deny": ["[a-"]}, "is not a valid regular expression"),
    ({"max_pages_per_host": -1}, "max-pages-per-host must be between 0"),
    ({"user_agent": "a\nb"}, "user agent must be one line"),
])
def test_bad_request_fields_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_crawl_request([SEED], **kwargs)


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
