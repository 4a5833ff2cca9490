"""robots.txt bodies read into groups and matched with a bound (crawl_platform.fetch.robots_rules):
any body and any URL get an answer, never an exception; hostile bodies at the size limit are read
and answered in bounded time; the answers are Protego's for the group of the product token."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protego import Protego

from crawl_platform.fetch.robots import ROBOTS_MAX_BYTES, policy_from, robots_token
from crawl_platform.fetch.robots_rules import WILDCARD_BUDGET, RobotsRules
from crawl_platform.urls import MAX_URL_LENGTH

AGENT = "bot/1.0 (+http://bot.example/)"
ORIGIN = "http://h.example"
LONG_URL = ORIGIN + "/" + "a" * (MAX_URL_LENGTH - len(ORIGIN) - 1)


def _policy(body: str):
    return policy_from(200, body, 0.0, 1e9, 1.0)


def _fill(head: str, line, size: int = ROBOTS_MAX_BYTES) -> str:
    """``head``, then ``line(i)`` for i = 0, 1, ... while the body stays within ``size`` bytes."""
    lines, used, i = [head], len(head) + 1, 0
    while used + len(line(i)) + 1 <= size:
        lines.append(line(i))
        used += len(line(i)) + 1
        i += 1
    return "\n".join(lines) + "\n"


_FIELD = st.sampled_from(["User-agent", "user agent", "Useragent", "Allow", "Disallow", "Dissallow",
                          "Crawl-delay", "Sitemap", "Host", "Request-rate", "Noindex", ""])
_AGENT_NAME = st.sampled_from(["*", "bot", "BOT", "b*t", "other", "bot/1.0", ""])
_PATH = st.text(st.sampled_from("/ab*$%?=.2F#: \t"), max_size=12)
_LINE = st.one_of(
    st.builds(lambda f, sep, v: f"{f}{sep}{v}", _FIELD, st.sampled_from([": ", ":", " ", ":\t"]),
              st.one_of(_AGENT_NAME, _PATH, st.sampled_from(["5", "-1", "nan", "1e400", "0.5"]))),
    st.text(max_size=30),
)
_BODY = st.lists(_LINE, max_size=25).map("\n".join)
_URL = st.builds(lambda path: ORIGIN + path, st.text(st.sampled_from("/ab*$%?=.2F"), max_size=15))


@settings(max_examples=400, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(_BODY, st.text(max_size=400)), url=st.one_of(_URL, st.text(max_size=40)),
       agent=st.one_of(st.sampled_from([AGENT, "other/2", "*"]), st.text(max_size=20)))
def test_any_body_and_any_url_get_an_answer(body, url, agent):
    policy = _policy(body)
    assert isinstance(policy.allows(url, agent), bool)
    delay = policy.crawl_delay(agent)
    assert delay is None or isinstance(delay, float)
    assert all(isinstance(s, str) for s in policy.sitemaps)


@settings(max_examples=400, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_BODY, url=_URL, agent=st.sampled_from([AGENT, "other/2"]))
def test_the_answer_is_protegos_for_the_group_of_the_product_token(body, url, agent):
    # Protego given the whole file, asked with our token when the file has a group of that name (its
    # rule sets: a private attribute, read here only to pick the name to ask with), else with "*".
    whole = Protego.parse(body)
    token = robots_token(agent)
    asked = token if token in whole._user_agents else "*"
    policy = _policy(body)
    assert policy.allows(url, agent) == whole.can_fetch(url, asked)
    assert policy.crawl_delay(agent) == whole.crawl_delay(asked)
    assert policy.sitemaps == list(whole.sitemaps)


def test_wildcard_rules_past_the_budget_are_ignored_and_plain_rules_never():
    filler = [f"Disallow: /*{'z' * 60}{i}" for i in range(WILDCARD_BUDGET // 62)]  # about the whole budget
    body = "\n".join(["User-agent: *", *filler, "Disallow: /*late", "Disallow: /plain", *filler[:3]])
    policy = _policy(body)
    assert policy.allows(ORIGIN + "/x/late", AGENT)  # past the budget: ignored
    assert not policy.allows(ORIGIN + "/plain/x", AGENT)
    assert not policy.allows(ORIGIN + "/x" + "z" * 60 + "0", AGENT)  # within it
    # Repeating a rule costs nothing: the same rule 5,000 times leaves room for the next.
    repeated = "\n".join(["User-agent: *", *["Disallow: /*" + "z" * 60] * 5_000, "Disallow: /*late"])
    assert not _policy(repeated).allows(ORIGIN + "/x/late", AGENT)


def test_a_crawl_delay_repeated_keeps_the_last_valid_one():
    body = "User-agent: *\nCrawl-delay: 5\nCrawl-delay: 10\nCrawl-delay: 5\nCrawl-delay: soon\n"
    assert _policy(body).crawl_delay(AGENT) == 5.0


def test_a_body_with_lone_surrogates_and_a_url_protego_cannot_split_get_answers():
    policy = _policy("User-agent: *\nDisallow: /\ud800x\nAllow: /ok\n")
    assert policy.allows(ORIGIN + "/ok", AGENT)
    assert not policy.allows("//[/x", AGENT)  # urlsplit raises: not fetched
    assert not policy.allows(ORIGIN + "/\ud800", AGENT)  # quoting raises: not fetched


@pytest.mark.timing
@pytest.mark.parametrize("body", [
    # Protego alone adds each rule to every agent of its group: minutes and gigabytes at this size.
    pytest.param(_fill("User-agent: *", lambda i: f"User-agent: a{i}", ROBOTS_MAX_BYTES // 2)
                 + _fill("Allow: /", lambda i: f"Disallow: /x{i}", ROBOTS_MAX_BYTES // 2), id="agents-then-rules"),
    # A multi-line regex for group lines (^\s*user-agent) is quadratic in blank lines.
    pytest.param("\n" * ROBOTS_MAX_BYTES, id="blank-lines"),
    # str.find's worst case for each rule, URL length times each pattern.
    pytest.param(_fill("User-agent: *", lambda i: f"Disallow: /*{'a' * 98}ba*{i}"), id="wildcards"),
    pytest.param(_fill("User-agent: *", lambda i: f"Disallow: /*a*a*a*b{i}$"), id="wildcards-with-dollar"),
])
def test_a_hostile_body_at_the_size_limit_is_read_and_answered_in_bounded_time(body):
    started = time.perf_counter()
    policy = _policy(body)
    policy.allows(LONG_URL, AGENT)  # the first question builds the group's matcher
    assert time.perf_counter() - started < 3.0
    started = time.perf_counter()
    for _ in range(10):
        policy.allows(LONG_URL, AGENT)
    assert (time.perf_counter() - started) / 10 < 0.05  # Protego alone: up to 0.2 s a URL


def test_rules_read_once_per_group_whatever_the_number_of_agents():
    rules = RobotsRules("User-agent: a\nUser-agent: b\nDisallow: /x\n\nUser-agent: b\nDisallow: /y\n")
    assert not rules.allows(ORIGIN + "/y", "b")
    assert not rules.allows(ORIGIN + "/x", "b")
    assert rules.allows(ORIGIN + "/y", "a")
    assert rules.allows(ORIGIN + "/x", "c")  # no group of its own and no "*": no rules
