"""Bus message codecs (crawl_platform.bus.messages): round trips and every way a payload is refused."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from crawl_platform.bus.messages import (
    CrawlControl,
    CrawlRequest,
    DeadLetter,
    FrontierURL,
    MessageDecodeError,
    PageEvent,
    decode_crawl_control,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
    decode_page_event,
    encode,
)

REQUEST = CrawlRequest("c-1", ("http://a.example/", "http://b.example/x"), 500, 3, "domain", 1_700_000_000.25)
FRONTIER = FrontierURL("c-1", "http://a.example/page?x=1", 2)
LETTER = DeadLetter.for_payload("not JSON: boom", "crawl.frontier", 3, 42, b"\x00\xffraw")
EVENT = PageEvent("http://a.example/p", "c-1", 2, 200, "ab" * 32, "2026-12-01T10:00:00.5Z", "e0.p1-0-50",
                  None, "2026-12-01/e0.p1-0-50-s0-3f9c0a1b2c4d.warc.gz", 1024, 733)
FAILED_EVENT = PageEvent("http://a.example/q", "c-1", 1, None, "cd" * 32, "2026-12-01T10:00:01Z", "e0.p1-0-50",
                         "timeout: read timed out")
FULL_REQUEST = CrawlRequest("c-2", ("http://a.example/",), 10, 0, "any", 1_700_000_000.0, ("/docs/",),
                            (r"\.pdf$",), 7, "Bot/1.0 (+x) \u00e9", True, 21600, "0 * * * *", 1500, 2, 5)
CONTROL = CrawlControl("c-1", "pause", 1_700_000_000.5)

# Written by the hand-made codec that first put these messages on the wire: every producer and
# every message still in a topic uses exactly these bytes.
WIRE = [
    (REQUEST, decode_crawl_request,
     b'{"crawl_id":"c-1","seeds":["http://a.example/","http://b.example/x"],"max_pages":500,"max_depth":3,'
     b'"scope":"domain","submitted_at":1700000000.25,"allow_patterns":[],"deny_patterns":[],'
     b'"max_pages_per_host":0,"user_agent":"","use_sitemaps":false,"every_seconds":0,"cron":"",'
     b'"host_delay_ms":0,"host_concurrency":0,"priority":0,"type":"crawl_request","v":1}'),
    (FULL_REQUEST, decode_crawl_request,
     b'{"crawl_id":"c-2","seeds":["http://a.example/"],"max_pages":10,"max_depth":0,"scope":"any",'
     b'"submitted_at":1700000000.0,"allow_patterns":["/docs/"],"deny_patterns":["\\\\.pdf$"],'
     b'"max_pages_per_host":7,"user_agent":"Bot/1.0 (+x) \\u00e9","use_sitemaps":true,"every_seconds":21600,'
     b'"cron":"0 * * * *","host_delay_ms":1500,"host_concurrency":2,"priority":5,"type":"crawl_request","v":1}'),
    (FRONTIER, decode_frontier_url,
     b'{"crawl_id":"c-1","url":"http://a.example/page?x=1","depth":2,"type":"frontier_url","v":1}'),
    (LETTER, decode_dead_letter,
     b'{"reason":"not JSON: boom","source_topic":"crawl.frontier","partition":3,"offset":42,'
     b'"payload_b64":"AP9yYXc=","type":"dead_letter","v":1}'),
    (EVENT, decode_page_event,
     b'{"url":"http://a.example/p","crawl_id":"c-1","version":2,"status":200,"content_hash":"' + b"ab" * 32 +
     b'","fetched_at":"2026-12-01T10:00:00.5Z","batch_id":"e0.p1-0-50","error":null,'
     b'"warc_file":"2026-12-01/e0.p1-0-50-s0-3f9c0a1b2c4d.warc.gz","warc_offset":1024,"warc_length":733,"type":"page","v":1}'),
    (FAILED_EVENT, decode_page_event,
     b'{"url":"http://a.example/q","crawl_id":"c-1","version":1,"status":null,"content_hash":"' + b"cd" * 32 +
     b'","fetched_at":"2026-12-01T10:00:01Z","batch_id":"e0.p1-0-50","error":"timeout: read timed out",'
     b'"warc_file":null,"warc_offset":null,"warc_length":null,"type":"page","v":1}'),
    (CONTROL, decode_crawl_control,
     b'{"crawl_id":"c-1","action":"pause","issued_at":1700000000.5,"type":"crawl_control","v":1}'),
]
# A crawl request as producers wrote it before the per-crawl policies (delay, concurrency, priority).
BEFORE_POLICIES = (b'{"crawl_id":"c-1","seeds":["http://a.example/","http://b.example/x"],"max_pages":500,'
                   b'"max_depth":3,"scope":"domain","submitted_at":1700000000.25,"allow_patterns":[],'
                   b'"deny_patterns":[],"max_pages_per_host":0,"user_agent":"","use_sitemaps":false,'
                   b'"type":"crawl_request","v":1}')
# A crawl request as v1 was first published, before the optional fields were added.
FIRST_V1_REQUEST = (b'{"crawl_id":"c-1","seeds":["http://a.example/"],"max_pages":5,"max_depth":1,"scope":"host",'
                    b'"submitted_at":1700000000,"type":"crawl_request","v":1}')
LATER_FIELDS = ("allow_patterns", "deny_patterns", "max_pages_per_host", "user_agent", "use_sitemaps",
                "every_seconds", "cron", "host_delay_ms", "host_concurrency", "priority")

DECODERS = [
    (REQUEST, decode_crawl_request),
    (FRONTIER, decode_frontier_url),
    (LETTER, decode_dead_letter),
    (EVENT, decode_page_event),
    (CONTROL, decode_crawl_control),
]


def _body(message) -> dict:
    return json.loads(encode(message))


def _payload(body: dict) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_round_trip(message, decode):
    assert decode(encode(message)) == message


@pytest.mark.parametrize(("message", "decode", "wire"), WIRE)
def test_wire_format_is_pinned(message, decode, wire):
    assert encode(message) == wire
    assert decode(wire) == message


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_encoded_message_carries_type_and_version(message, decode):
    body = _body(message)
    assert body["type"] == message.TYPE
    assert body["v"] == message.VERSION


def test_dead_letter_keeps_the_original_bytes():
    decoded = decode_dead_letter(encode(LETTER))
    assert base64.b64decode(decoded.payload_b64) == b"\x00\xffraw"
    assert (decoded.source_topic, decoded.partition, decoded.offset) == ("crawl.frontier", 3, 42)


def test_integer_submitted_at_decodes_as_float():
    body = _body(REQUEST) | {"submitted_at": 1_700_000_000}
    assert decode_crawl_request(_payload(body)).submitted_at == 1_700_000_000.0


@pytest.mark.parametrize("decode", [decode_crawl_request, decode_frontier_url, decode_dead_letter])
@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (None, "empty payload"),
        (b"", "not JSON"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"a string"', "not a JSON object"),
        (b"null", "not a JSON object"),
        (b'{"v": 1}', "type is None"),
    ],
)
def test_payloads_that_are_not_messages(decode, payload, reason):
    with pytest.raises(MessageDecodeError, match=reason):
        decode(payload)


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_wrong_type_is_refused(message, decode):
    other = FRONTIER if message is not FRONTIER else REQUEST
    with pytest.raises(MessageDecodeError) as caught:
        decode(encode(other))
    assert f"type is {other.TYPE!r}, expected {message.TYPE!r}" in str(caught.value)


@pytest.mark.parametrize(("message", "decode"), DECODERS)
@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_wrong_version_is_refused(message, decode, version):
    body = _body(message) | {"v": version}
    with pytest.raises(MessageDecodeError, match="unsupported version"):
        decode(_payload(body))


def test_boolean_version_is_refused():
    body = _body(FRONTIER) | {"v": True}
    with pytest.raises(MessageDecodeError, match="unsupported version"):
        decode_frontier_url(_payload(body))


@pytest.mark.parametrize(
    ("message", "decode", "field"),
    [(REQUEST, decode_crawl_request, f) for f in
     ("crawl_id", "seeds", "max_pages", "max_depth", "scope", "submitted_at")]
    + [(FRONTIER, decode_frontier_url, f) for f in ("crawl_id", "url", "depth")]
    + [(LETTER, decode_dead_letter, f) for f in
       ("reason", "source_topic", "partition", "offset", "payload_b64")],
)
def test_missing_field_is_named(message, decode, field):
    body = _body(message)
    del body[field]
    with pytest.raises(MessageDecodeError) as caught:
        decode(_payload(body))
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
    body = _body(message) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode(_payload(body))
    reason = str(caught.value)
    assert f"'{field}'" in reason
    assert "\n" not in reason


@pytest.mark.parametrize("depth", [-1, -100])
def test_negative_depth_is_refused(depth):
    body = _body(FRONTIER) | {"depth": depth}
    with pytest.raises(MessageDecodeError, match=rf"'depth' must be 0..10000, got {depth}"):
        decode_frontier_url(_payload(body))


@pytest.mark.parametrize("seeds", [[], [1], ["http://a.example/", None]])
def test_seeds_must_be_a_non_empty_list_of_strings(seeds):
    body = _body(REQUEST) | {"seeds": seeds}
    with pytest.raises(MessageDecodeError, match="non-empty list of strings"):
        decode_crawl_request(_payload(body))


@pytest.mark.parametrize("scope", ["planet", "HOST", ""])
def test_unknown_scope_is_refused_with_the_choices(scope):
    body = _body(REQUEST) | {"scope": scope}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(_payload(body))
    reason = str(caught.value)
    assert repr(scope) in reason
    assert all(choice in reason for choice in ("host", "domain", "any"))


def test_decode_error_is_a_value_error():
    # Callers that catch ValueError (e.g. generic input validation) also catch bad messages.
    assert issubclass(MessageDecodeError, ValueError)


def test_a_request_from_before_the_optional_fields_decodes_with_their_defaults():
    request = decode_crawl_request(FIRST_V1_REQUEST)
    assert request == CrawlRequest("c-1", ("http://a.example/",), 5, 1, "host", 1_700_000_000.0)
    assert (request.allow_patterns, request.deny_patterns, request.max_pages_per_host, request.user_agent,
            request.use_sitemaps) == ((), (), 0, "", False)


def test_extraction_rules_travel_when_given_and_are_left_off_the_wire_when_not():
    with_rules = dataclasses.replace(REQUEST, extract_rules='{"fields":{"t":"h1"}}')
    wire = encode(with_rules)
    assert wire.endswith(b',"priority":0,"extract_rules":"{\\"fields\\":{\\"t\\":\\"h1\\"}}",'
                         b'"type":"crawl_request","v":1}')
    assert decode_crawl_request(wire) == with_rules
    assert b"extract_rules" not in encode(REQUEST)
    assert decode_crawl_request(_payload(_body(REQUEST) | {"extract_rules": None})).extract_rules == ""


def test_optional_fields_sent_as_null_take_their_defaults():
    body = _body(FULL_REQUEST) | dict.fromkeys(LATER_FIELDS)
    decoded = decode_crawl_request(_payload(body))
    assert decoded == dataclasses.replace(FULL_REQUEST, allow_patterns=(), deny_patterns=(), max_pages_per_host=0,
                                          user_agent="", use_sitemaps=False, every_seconds=0, cron="",
                                          host_delay_ms=0, host_concurrency=0, priority=0)


def test_a_request_from_before_the_per_crawl_policies_decodes_with_the_platform_defaults():
    assert decode_crawl_request(BEFORE_POLICIES) == REQUEST
    assert (REQUEST.host_delay_ms, REQUEST.host_concurrency, REQUEST.priority) == (0, 0, 0)


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
        decode_crawl_control(_payload(_body(CONTROL) | body))
    assert str(caught.value) == reason


def test_policy_fields_are_range_checked():
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(_payload(_body(REQUEST) | {"host_concurrency": 65}))
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
    body = _body(REQUEST) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(_payload(body))
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
    body = _body(REQUEST) | {field: value}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(_payload(body))
    assert str(caught.value) == reason


def test_missing_field_reason_is_one_exact_line():
    body = _body(FRONTIER)
    del body["url"]
    with pytest.raises(MessageDecodeError) as caught:
        decode_frontier_url(_payload(body))
    assert str(caught.value) == "field 'url' is missing"


def test_a_value_with_a_newline_stays_on_one_line():
    body = _body(REQUEST) | {"max_pages": "5\n6"}
    with pytest.raises(MessageDecodeError) as caught:
        decode_crawl_request(_payload(body))
    assert str(caught.value) == "field 'max_pages' must be an integer, got '5\\n6'"


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_messages_are_frozen_and_hashable(message, decode):
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.crawl_id = "other"  # type: ignore[misc]
    assert {message, decode(encode(message))} == {message}


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
        decode(_payload(_body(message) | {"crawl_id": crawl_id}))
    assert str(caught.value).startswith(f"field 'crawl_id': crawl id {crawl_id!r} must be 1-128 letters, digits")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("crawl_id", ["a", "docs.python.org-20261206-120000-ab12", "A_b-c.d", "a" * 128,
                                      "blog@20261130T1200", "fam@soon"])
def test_crawl_ids_inside_the_pattern_decode(crawl_id):
    assert decode_crawl_request(_payload(_body(REQUEST) | {"crawl_id": crawl_id})).crawl_id == crawl_id


@pytest.mark.parametrize(("message", "decode", "field"), [(REQUEST, decode_crawl_request, "submitted_at"),
                                                          (CONTROL, decode_crawl_control, "issued_at")])
def test_a_time_ahead_of_the_clock_is_refused(message, decode, field):
    import time  # noqa: PLC0415

    ahead = time.time() + 3600
    with pytest.raises(MessageDecodeError, match=rf"^field '{field}': [0-9.]+ is 3600 s ahead of this machine's "
                                                 r"clock \(at most 300 s\)$"):
        decode(_payload(_body(message) | {field: ahead}))
    # A producer's clock a little ahead is fine.
    assert getattr(decode(_payload(_body(message) | {field: time.time() + 60})), field) > time.time()


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
        decode_crawl_request(_payload(_body(REQUEST) | {field: value}))
    assert str(caught.value) == reason


def test_a_frontier_depth_beyond_the_depth_limit_is_refused():
    with pytest.raises(MessageDecodeError) as caught:
        decode_frontier_url(_payload(_body(FRONTIER) | {"depth": 2**31}))
    assert str(caught.value) == "field 'depth' must be 0..10000, got 2147483648"
