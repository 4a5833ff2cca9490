"""URL rules (crawl_platform.urls): the canonical form, link resolution, seed errors and crawl scope."""

from __future__ import annotations

import random
import string
from urllib.parse import urljoin

import pytest

from crawl_platform.urls import MAX_URL_LENGTH, CrawlScope, InvalidURLError, canonicalize, resolve_link


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("HTTP://Example.COM/Path", "http://example.com/Path"),  # scheme and host fold, path does not
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),  # 80 is not https's default
        ("http://example.com/a#section-2", "http://example.com/a"),
        ("http://example.com/a?b=2&a=1&c=", "http://example.com/a?a=1&b=2&c="),
        ("http://example.com", "http://example.com/"),
        ("http://example.com?x=1", "http://example.com/?x=1"),
        ("  http://example.com/a  ", "http://example.com/a"),
        ("http://example.com./a", "http://example.com/a"),
        ("http://example.com/%7Euser", "http://example.com/~user"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://[2001:DB8::1]:80/", "http://[2001:db8::1]/"),
    ],
)
def test_canonicalize(raw, canonical):
    assert canonicalize(raw) == canonical
    assert canonicalize(canonical) == canonical  # the canonical form is a fixed point


def test_urls_that_differ_only_in_form_are_the_same_url():
    variants = [
        "http://Example.com/p?b=2&a=1",
        "HTTP://example.COM:80/p?a=1&b=2#top",
        "http://example.com./p?a=1&b=2",
    ]
    assert {canonicalize(v) for v in variants} == {"http://example.com/p?a=1&b=2"}


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        ("../c", "http://h.example/a/c"),
        ("c?y=2&x=1#frag", "http://h.example/a/b/c?x=1&y=2"),
        ("/root", "http://h.example/root"),
        ("//other.example/x", "http://other.example/x"),
        ("https://other.example:443/", "https://other.example/"),
        ("  ./d  ", "http://h.example/a/b/d"),
    ],
)
def test_resolve_link(href, resolved):
    assert resolve_link("http://h.example/a/b/index.html", href) == resolved


@pytest.mark.parametrize(
    "href",
    ["mailto:someone@example.com", "javascript:void(0)", "JavaScript:alert(1)", "#section-1", "#",
     "tel:+123", "data:text/plain,hi", "ftp://files.example/x", "", "   "],
)
def test_resolve_link_drops_what_cannot_be_crawled(href):
    assert resolve_link("http://h.example/a/b", href) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://files.example/x", "only http and https"),
        ("not a url", "only http and https"),
        ("mailto:a@b.example", "only http and https"),
        ("http://", "no host"),
        ("http:///path", "no host"),
        ("http://example.com:99999/", "out of range"),
        ("http://example.com:http/", "port"),
    ],
)
def test_invalid_url_error_names_the_url_and_the_reason(url, reason):
    with pytest.raises(InvalidURLError) as caught:
        canonicalize(url)
    message = str(caught.value)
    assert reason.lower() in message.lower()
    assert repr(url) in message
    assert "\n" not in message


def test_a_remembered_url_gives_the_same_answer_and_a_bad_one_fails_every_time():
    """canonicalize remembers what it computed (CANONICAL_CACHE_SIZE); errors are not remembered."""
    assert canonicalize(" HTTP://Example.COM:80/a?b=2&a=1#x ") == canonicalize("http://example.com/a?a=1&b=2")
    for _ in range(2):
        with pytest.raises(InvalidURLError, match="only http and https"):
            canonicalize("ftp://example.com/file")


@pytest.mark.parametrize("base", ["http://Example.com:8080/dir/page.html?x=1", "https://user@example.com/",
                                  "http://example.com"])
@pytest.mark.parametrize("href", ["/a/b.html", "/a/b?z=1&a=2#frag", "/", "/a/../b", "/./c", "/a/.hidden",
                                  "/tab\there", " /spaced ", "/%7Euser/", "//other.org/x", "/a//b",
                                  "/q?next=/x/./y", "relative.html", "../up.html", "http://Other.ORG/x"])
def test_resolve_link_agrees_with_urljoin(base, href):
    """resolve_link skips urljoin for absolute paths without dot segments: the same URL either way."""
    try:
        expected = canonicalize(urljoin(base, href.strip()))
    except InvalidURLError:
        expected = None
    assert resolve_link(base, href) == expected


def test_too_long_url_is_refused_with_a_short_message():
    prefix = "http://example.com/"
    assert canonicalize(prefix + "a" * (MAX_URL_LENGTH - len(prefix)))  # exactly at the limit is fine
    with pytest.raises(InvalidURLError) as caught:
        canonicalize(prefix + "a" * (MAX_URL_LENGTH + 1 - len(prefix)))
    message = str(caught.value)
    assert f"longer than {MAX_URL_LENGTH} characters" in message
    assert len(message) < 200  # the URL itself is abbreviated, not echoed in full


def test_host_with_a_space_is_invalid():
    with pytest.raises(InvalidURLError, match=r"^'http://exa mple\.com/': invalid host name 'exa mple\.com'$"):
        canonicalize("http://exa mple.com/")


def test_host_scope_admits_only_the_seed_hosts():
    scope = CrawlScope.for_seeds("host", [canonicalize("http://a.example.co.uk/start")])
    assert scope.admits("http://a.example.co.uk/other?x=1")
    assert not scope.admits("http://b.example.co.uk/")
    assert not scope.admits("http://a.example.co.uk:8080/")  # another port is another host


def test_domain_scope_admits_sibling_subdomains_but_not_other_domains():
    scope = CrawlScope.for_seeds("domain", [canonicalize("http://a.example.co.uk/")])
    assert scope.admits("http://b.example.co.uk/x")
    assert scope.admits("http://example.co.uk/")
    assert scope.admits("https://deep.a.example.co.uk:8443/")
    assert not scope.admits("http://other.co.uk/")  # co.uk is a public suffix, not a shared domain
    assert not scope.admits("http://example.com/")


def test_domain_scope_of_an_ip_seed_is_that_ip():
    scope = CrawlScope.for_seeds("domain", ["http://127.0.0.1:8000/"])
    assert scope.admits("http://127.0.0.1:9000/")
    assert not scope.admits("http://127.0.0.2:8000/")


def test_any_scope_admits_everything():
    scope = CrawlScope.for_seeds("any", ["http://a.example/"])
    assert scope.admits("https://elsewhere.example.org/page")


def test_scope_with_several_seeds_admits_each_seed_host():
    scope = CrawlScope.for_seeds("host", ["http://a.example/", "http://b.example:8080/"])
    assert scope.admits("http://a.example/x")
    assert scope.admits("http://b.example:8080/y")
    assert not scope.admits("http://b.example/y")


@pytest.mark.parametrize("base", ["http://example.com/x.html", "http://127.0.0.1:8080/a/b", "http://127.0.0.1:8080/a/b/",
                                  "https://Example.COM:443/d/", "http://[::1]:81/", "http://ex.org:80/p?q",
                                  "HTTP://ex.org/a/b.html", "http://ex.org/a/b.html?x=1#f", "http://ex.org/a;p/b.html",
                                  "http://ex.org/a/./b.html", "http://ex.org//a/b", "http://ex.org", "http://ex.org/%7Ea/b",
                                  "http://b\u00fccher.de/a/"])
def test_links_resolve_to_what_urljoin_and_canonicalize_give(base):
    """resolve_link's shortcuts (a plain absolute or document-relative path on a canonical origin is
    the URL as it is; a fragment is dropped first) give what urljoin then canonicalize give, for
    random hrefs of every form: absolute, relative, dot segments, queries, fragments, escapes."""
    rng = random.Random(12)
    chars = string.ascii_letters + string.digits + "._~!$&'()*+,=:@/-#?%"
    for _ in range(3000):
        href = rng.choice(["", "/", "./", "../", "?", "a/", "/a/", "//"]) + "".join(
            rng.choice(chars) for _ in range(rng.randint(0, 30)))
        if not href or href.startswith("#"):
            continue
        try:
            expected = canonicalize(urljoin(base, href))
        except (InvalidURLError, ValueError):
            expected = None
        assert resolve_link(base, href) == expected, href
