"""What each field of a bus message accepts (crawl_platform.bus.messages): a missing, mistyped or
out-of-range field, a crawl id outside its pattern, a time ahead of the clock, a bad schedule,
pattern, User-Agent or rule set, each refused with the one exact line that names the field. The
wire format itself is ``test_messages.py``'s."""

from __future__ import annotations

import pytest

from crawl_platform.bus.messages import (
    CrawlRequest,
    FrontierURL,
    MessageDecodeError,
    decode_crawl_control,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
    encode,
)
from tests.unit.sample_messages import CONTROL, FRONTIER, LETTER, REQUEST, body_of, payload_of


@pytest.mark.parametrize(
    ("message", "decode", "field"),
    [(REQUEST, decode_crawl_request, f) for f in
     ("crawl_id", "seeds", "max_pages", "max_depth", "scope", "submitted_at")]
    + [(FRONTIER, decode_frontier_url, f) for f in ("crawl_id", "url", "depth")]
    + [(LETTER, decode_dead_letter, f) for f in
       ("reason", "source_topic", "partition", "offset", "payload_b64")],
)
def test_missing_field_is_named(message, decode, field):
    body = body_of(message)
    del body[field]
    with pytest.raises(MessageDecodeError) as caught:
        decode(payload_of(body))
    assert f"'{field}'" in str(caught.value)


@pytest.mark.parametrize(
    ("message", "decode", "field", "value"),
    [
        (REQUEST, decode_crawl_request, "crawl_id", 7),
        (REQUEST, decode_crawl_request, "seeds", "http://a.example/"),
        (REQUEST, decode_crawl_request, "max_pages", "500"),
        (REQUEST, decode_crawl_request, "max_pages", 500.0),
        (REQUEST, decode_crawl_request, "max_pages", True),
        (REQUEST, decode_crawl_request, "max_depth", False),
        (REQUEST, decode_crawl_request, "max_depth", None),
        (REQUEST, decode_crawl_request, "scope", 1),
        (REQUEST, decode_crawl_request, "submitted_at", "yesterday"),
        (REQUEST, decode_crawl_request, "submitted_at", True),
        (FRONTIER, decode_frontier_url, "url", ["http://a.example/"]),
        (FRONTIER, decode_frontier_url, "crawl_id", None),
        (FRONTIER, decode_frontier_url, "depth", "2"),
        (FRONTIER, decode_frontier_url, "depth", True),
        (FRONTIER, decode_frontier_url, "depth", 1.5),
        (LETTER, decode_dead_letter, "partition", True),
        (LETTER, decode_dead_letter, "offset", "42"),
        (LETTER, decode_dead_letter, "payload_b64", 5),
    ],
)
def test_mistyped_field_is_named_with_its_value(message, decode, field, value):
    body = body_of(message) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode(payload_of(body))
    reason = str(caught.value)
    assert f"'{field}'" in reason
    assert "\n" not in reason


@pytest.mark.parametrize("depth", [-1, -100])
def test_negative_depth_is_refused(depth):
    body = body_of(FRONTIER) | {"depth": depth}
    with pytest.raises(MessageDecodeError, match=rf"'depth' must be 0..10000, got {depth}"):
        decode_frontier_url(payload_of(body))


@pytest.mark.parametrize("seeds", [[], [1], ["http://a.example/", None]])
def test_seeds_must_be_a_non_empty_list_of_strings(seeds):
    body = body_of(REQUEST) | {"seeds": seeds}
    with pytest.raises(MessageDecodeError, match="non-empty list of strings"):
        decode_crawl_request(payload_of(body))


@pytest.mark.parametrize("scope", ["planet", "HOST", ""])
def test_unknown_scope_is_refused_with_the_choices(scope):
    body = body_of(REQUEST) | {"scope": scope}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body))
    reason = str(caught.value)
    assert repr(scope) in reason
    assert all(choice in reason for choice in ("host", "domain", "any"))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"action": "stop"}, "field 'action' must be one of ('cancel', 'pause', 'resume'), got 'stop'"),
        ({"issued_at": "now"}, "field 'issued_at' must be a Unix time, got 'now'"),
        ({"crawl_id": 3}, "field 'crawl_id' must be a string, got 3"),
    ],
)
def test_a_bad_control_command_is_refused_with_one_line(body, reason):
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_control(payload_of(body_of(CONTROL) | body))
    assert str(caught.value) == reason


def test_policy_fields_are_range_checked():
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body_of(REQUEST) | {"host_concurrency": 65}))
    assert str(caught.value) == "field 'host_concurrency' must be 0..64, got 65"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("max_pages", 0, "field 'max_pages' must be 1..2147483647, got 0"),
        ("max_pages", 2**31, "field 'max_pages' must be 1..2147483647, got 2147483648"),
        ("max_depth", -1, "field 'max_depth' must be 0..10000, got -1"),
        ("max_depth", 10_001, "field 'max_depth' must be 0..10000, got 10001"),
        ("max_pages_per_host", -1, "field 'max_pages_per_host' must be 0..2147483647, got -1"),
        ("max_pages_per_host", 2**31, "field 'max_pages_per_host' must be 0..2147483647, got 2147483648"),
        ("submitted_at", -1.0, "field 'submitted_at' must be 0..32503680000.0, got -1.0"),
        ("submitted_at", 4e10, "field 'submitted_at' must be 0..32503680000.0, got 40000000000.0"),
    ],
)
def test_out_of_range_limit_is_refused_with_its_bounds(field, value, reason):
    body = body_of(REQUEST) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body))
    assert str(caught.value) == reason


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_submitted_at_must_be_a_finite_number(literal):
    payload = encode(REQUEST).replace(b"1700000000.25", literal)
    with pytest.raises(MessageDecodeError, match=r"^field 'submitted_at' must be 0\.\.32503680000\.0, got "):
        decode_crawl_request(payload)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("max_pages", True, "field 'max_pages' must be an integer, got True"),
        ("crawl_id", 7, "field 'crawl_id' must be a string, got 7"),
        ("submitted_at", "yesterday", "field 'submitted_at' must be a Unix time, got 'yesterday'"),
        ("seeds", ["http://a.example/", None],
         "field 'seeds' must be a non-empty list of strings, got None at index 1"),
        ("allow_patterns", "/docs/", "field 'allow_patterns' must be a list of strings, got '/docs/'"),
        ("deny_patterns", [1], "field 'deny_patterns' must be a list of strings, got 1 at index 0"),
        ("max_pages_per_host", True, "field 'max_pages_per_host' must be an integer, got True"),
        ("user_agent", 5, "field 'user_agent' must be a string, got 5"),
        ("use_sitemaps", 1, "field 'use_sitemaps' must be true or false, got 1"),
        ("use_sitemaps", "yes", "field 'use_sitemaps' must be true or false, got 'yes'"),
    ],
)
def test_mistyped_field_reason_is_one_exact_line(field, value, reason):
    body = body_of(REQUEST) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body))
    assert str(caught.value) == reason


def test_missing_field_reason_is_one_exact_line():
    body = body_of(FRONTIER)
    del body["url"]
    with pytest.raises(MessageDecodeError) as caught:
        decode_frontier_url(payload_of(body))
    assert str(caught.value) == "field 'url' is missing"


def test_a_value_with_a_newline_stays_on_one_line():
    body = body_of(REQUEST) | {"max_pages": "5\n6"}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body))
    assert str(caught.value) == "field 'max_pages' must be an integer, got '5\\n6'"


@pytest.mark.parametrize(
    "build",
    [
        lambda: FrontierURL("c", "http://a.example/", True),
        lambda: FrontierURL("c", "http://a.example/", -1),
        lambda: CrawlRequest("c", (), 10, 1, "host", 1.0),
        lambda: CrawlRequest("c", ("http://a.example/",), 0, 1, "host", 1.0),
        lambda: CrawlRequest("c", ("http://a.example/",), 10, 1, "planet", 1.0),
    ],
)
def test_an_invalid_message_cannot_be_built(build):
    # The consumer would refuse it, so the producer never gets to publish it.
    with pytest.raises(ValueError, match="validation error"):
        build()


@pytest.mark.parametrize(
    "crawl_id",
    ["a...b", "a..b", "x\n", "-lead", ".hidden", "a/b", "a b", "a:b", "é", "", "a" * 129, "fam@", "fam@x/y",
     "a@b@c", "fam@" + "1" * 33],
)
@pytest.mark.parametrize(("message", "decode"), [(REQUEST, decode_crawl_request), (FRONTIER, decode_frontier_url),
                                                 (CONTROL, decode_crawl_control)])
def test_a_crawl_id_outside_the_pattern_is_refused_on_every_topic(message, decode, crawl_id):
    with pytest.raises(MessageDecodeError) as caught:
        decode(payload_of(body_of(message) | {"crawl_id": crawl_id}))
    assert str(caught.value).startswith(f"field 'crawl_id': crawl id {crawl_id!r} must be 1-128 letters, digits")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("crawl_id", ["a", "docs.python.org-20261206-120000-ab12", "A_b-c.d", "a" * 128,
                                      "blog@20261130T1200", "fam@soon"])
def test_crawl_ids_inside_the_pattern_decode(crawl_id):
    assert decode_crawl_request(payload_of(body_of(REQUEST) | {"crawl_id": crawl_id})).crawl_id == crawl_id


@pytest.mark.parametrize(("message", "decode", "field"), [(REQUEST, decode_crawl_request, "submitted_at"),
                                                          (CONTROL, decode_crawl_control, "issued_at")])
def test_a_time_ahead_of_the_clock_is_refused(message, decode, field):
    import time  # noqa: PLC0415

    ahead = time.time() + 3600
    with pytest.raises(MessageDecodeError, match=rf"^field '{field}': [0-9.]+ is 3600 s ahead of this machine's "
                                                 r"clock \(at most 300 s\)$"):
        decode(payload_of(body_of(message) | {field: ahead}))
    # A producer's clock a little ahead is fine.
    assert getattr(decode(payload_of(body_of(message) | {field: time.time() + 60})), field) > time.time()


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("cron", "x", "field 'cron': cron schedule 'x' is not a valid 5-field cron expression, e.g. '0 * * * *'"),
        ("cron", "@hourly", "field 'cron': cron schedule '@hourly' is not a valid 5-field cron expression, "
                            "e.g. '0 * * * *'"),
        ("cron", "99 * * * *", "field 'cron': cron schedule '99 * * * *' is not a valid 5-field cron expression, "
                               "e.g. '0 * * * *'"),
        ("every_seconds", 5, "field 'every_seconds': an interval must be 0 (none) or at least 60 seconds, not 5"),
        ("user_agent", "Bot\r\nX-Evil: 1", "field 'user_agent': user agent must be one line"),
        ("user_agent", "B" * 513, "field 'user_agent': user agent is longer than 512 characters"),
        ("allow_patterns", ["(?=x)"], "field 'allow_patterns': pattern '(?=x)' is not a valid RE2 regular "
                                      "expression: invalid perl operator: (?="),
        ("deny_patterns", [r"(a)\1"], "field 'deny_patterns': pattern '(a)\\\\1' is not a valid RE2 regular "
                                      "expression: invalid escape sequence: \\1"),
        ("allow_patterns", ["x"] * 101, "field 'allow_patterns': patterns: at most 100, got 101"),
        ("extract_rules", "[1]", "field 'extract_rules': extract_rules: must be a mapping with a 'fields' key, "
                                 "not list"),
    ],
)
def test_schedules_patterns_agents_and_rules_are_checked_when_decoded(field, value, reason):
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(payload_of(body_of(REQUEST) | {field: value}))
    assert str(caught.value) == reason


def test_a_frontier_depth_beyond_the_depth_limit_is_refused():
    with pytest.raises(MessageDecodeError) as caught:
        decode_frontier_url(payload_of(body_of(FRONTIER) | {"depth": 2**31}))
    assert str(caught.value) == "field 'depth' must be 0..10000, got 2147483648"
