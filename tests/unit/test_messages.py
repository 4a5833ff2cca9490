"""Bus message codecs (crawl_platform.bus.messages) on the wire: round trips, the pinned bytes, the
type and version every message carries, payloads that are no message of the expected kind, and
requests as older producers wrote them. What each field accepts is ``test_message_fields.py``'s."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from crawl_platform.bus.messages import (
    CrawlRequest,
    MessageDecodeError,
    PageEvent,
    decode_crawl_control,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
    decode_page_event,
    encode,
)
from tests.unit.sample_messages import CONTROL, FRONTIER, LETTER, REQUEST, body_of, payload_of

EVENT = PageEvent("http://a.example/p", "c-1", 2, 200, "ab" * 32, "2026-12-01T10:00:00.5Z", "e0.p1-0-50",
                  None, "2026-12-01/e0.p1-0-50-s0-3f9c0a1b2c4d.warc.gz", 1024, 733)
FAILED_EVENT = PageEvent("http://a.example/q", "c-1", 1, None, "cd" * 32, "2026-12-01T10:00:01Z", "e0.p1-0-50",
                         "timeout: read timed out")
FULL_REQUEST = CrawlRequest("c-2", ("http://a.example/",), 10, 0, "any", 1_700_000_000.0, ("/docs/",),
                            (r"\.pdf$",), 7, "Bot/1.0 (+x) \u00e9", True, 21600, "0 * * * *", 1500, 2, 5)

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


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_round_trip(message, decode):
    assert decode(encode(message)) == message


@pytest.mark.parametrize(("message", "decode", "wire"), WIRE)
def test_wire_format_is_pinned(message, decode, wire):
    assert encode(message) == wire
    assert decode(wire) == message


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_encoded_message_carries_type_and_version(message, decode):
    body = body_of(message)
    assert body["type"] == message.TYPE
    assert body["v"] == message.VERSION


def test_dead_letter_keeps_the_original_bytes():
    decoded = decode_dead_letter(encode(LETTER))
    assert base64.b64decode(decoded.payload_b64) == b"\x00\xffraw"
    assert (decoded.source_topic, decoded.partition, decoded.offset) == ("crawl.frontier", 3, 42)


def test_integer_submitted_at_decodes_as_float():
    body = body_of(REQUEST) | {"submitted_at": 1_700_000_000}
    assert decode_crawl_request(payload_of(body)).submitted_at == 1_700_000_000.0


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
    body = body_of(message) | {"v": version}
    with pytest.raises(MessageDecodeError, match="unsupported version"):
        decode(payload_of(body))


def test_boolean_version_is_refused():
    body = body_of(FRONTIER) | {"v": True}
    with pytest.raises(MessageDecodeError, match="unsupported version"):
        decode_frontier_url(payload_of(body))


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
    assert decode_crawl_request(payload_of(body_of(REQUEST) | {"extract_rules": None})).extract_rules == ""


def test_optional_fields_sent_as_null_take_their_defaults():
    body = body_of(FULL_REQUEST) | dict.fromkeys(LATER_FIELDS)
    decoded = decode_crawl_request(payload_of(body))
    assert decoded == dataclasses.replace(FULL_REQUEST, allow_patterns=(), deny_patterns=(), max_pages_per_host=0,
                                          user_agent="", use_sitemaps=False, every_seconds=0, cron="",
                                          host_delay_ms=0, host_concurrency=0, priority=0)


def test_a_request_from_before_the_per_crawl_policies_decodes_with_the_platform_defaults():
    assert decode_crawl_request(BEFORE_POLICIES) == REQUEST
    assert (REQUEST.host_delay_ms, REQUEST.host_concurrency, REQUEST.priority) == (0, 0, 0)


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_messages_are_frozen_and_hashable(message, decode):
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.crawl_id = "other"  # type: ignore[misc]
    assert {message, decode(encode(message))} == {message}
