"""Bus message codecs (crawl_platform.bus.messages): round trips and every way a payload is refused."""

from __future__ import annotations

import base64
import json

import pytest

from crawl_platform.bus.messages import (
    CrawlRequest,
    DeadLetter,
    FrontierURL,
    MessageDecodeError,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
    encode,
)

REQUEST = CrawlRequest("c-1", ("http://a.example/", "http://b.example/x"), 500, 3, "domain", 1_700_000_000.25)
FRONTIER = FrontierURL("c-1", "http://a.example/page?x=1", 2)
LETTER = DeadLetter.for_payload("not JSON: boom", "crawl.frontier", 3, 42, b"\x00\xffraw")

DECODERS = [
    (REQUEST, decode_crawl_request),
    (FRONTIER, decode_frontier_url),
    (LETTER, decode_dead_letter),
]


def _body(message) -> dict:
    return json.loads(encode(message))


def _payload(body: dict) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize(("message", "decode"), DECODERS)
def test_round_trip(message, decode):
    assert decode(encode(message)) == message


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
    with pytest.raises(MessageDecodeError, match=rf"'depth' must be >= 0, got {depth}"):
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
