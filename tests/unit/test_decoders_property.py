"""Every decoder of a message from the bus, fed anything: it decodes, or raises its own one-line
MessageDecodeError; never another exception (any producer can write to the topics). Time is
bounded by hypothesis's deadline per example and pytest-timeout per pathological input."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawl_platform.bus.messages import (
    CrawlControl,
    CrawlRequest,
    FrontierURL,
    MessageDecodeError,
    decode_crawl_control,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
    decode_page_event,
)

DECODERS = {"crawl_request": decode_crawl_request, "frontier_url": decode_frontier_url,
            "dead_letter": decode_dead_letter, "page": decode_page_event, "crawl_control": decode_crawl_control}
FIELDS = {
    "crawl_request": ["crawl_id", "seeds", "max_pages", "max_depth", "scope", "submitted_at", "allow_patterns",
                      "deny_patterns", "max_pages_per_host", "user_agent", "use_sitemaps", "every_seconds", "cron",
                      "host_delay_ms", "host_concurrency", "priority", "extract_rules"],
    "frontier_url": ["crawl_id", "url", "depth"],
    "dead_letter": ["reason", "source_topic", "partition", "offset", "payload_b64"],
    "page": ["url", "crawl_id", "version", "status", "content_hash", "fetched_at", "batch_id", "error"],
    "crawl_control": ["crawl_id", "action", "issued_at"],
}
PROPERTY = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
cron_like = st.lists(st.sampled_from(["*", "0", "59", "99", "*/5", "1-3", "L", "#", "@hourly", "?", "x"]),
                     min_size=0, max_size=7).map(" ".join)


def _decodes_or_refuses(decode, payload: bytes) -> None:
    reason = "decoded"
    try:
        decode(payload)
    except MessageDecodeError as err:
        reason = str(err)
    assert reason
    assert "\n" not in reason


@PROPERTY
@given(kind=st.sampled_from(sorted(DECODERS)), payload=st.binary(max_size=300))
def test_any_bytes(kind, payload):
    _decodes_or_refuses(DECODERS[kind], payload)


@PROPERTY
@given(kind=st.sampled_from(sorted(DECODERS)), value=json_values)
def test_any_json_value(kind, value):
    _decodes_or_refuses(DECODERS[kind], json.dumps(value).encode())


@PROPERTY
@given(kind=st.sampled_from(sorted(DECODERS)), data=st.data())
def test_any_values_in_the_right_fields(kind, data):
    body = {name: data.draw(json_values | cron_like, label=name)
            for name in data.draw(st.lists(st.sampled_from(FIELDS[kind]), unique=True))}
    body |= {"type": kind, "v": 1}
    _decodes_or_refuses(DECODERS[kind], json.dumps(body).encode())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [100, 5_000, 100_000])
@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_deep_nesting_is_refused_quickly(kind, depth):
    nested = "[" * depth + "]" * depth
    _decodes_or_refuses(DECODERS[kind], f'{{"type":"{kind}","v":1,"crawl_id":{nested}}}'.encode())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("depth", [100, 5_000])
def test_deeply_nested_extraction_rules_are_refused_with_one_line(depth):
    rules = "fields:\n  a: " + "[" * depth + "]" * depth
    body = {"crawl_id": "c", "seeds": ["http://a.example/"], "max_pages": 1, "max_depth": 0, "scope": "host",
            "submitted_at": 1.0, "extract_rules": rules, "type": "crawl_request", "v": 1}
    with pytest.raises(MessageDecodeError, match=r"^field 'extract_rules': "):
        decode_crawl_request(json.dumps(body).encode())


@PROPERTY
@given(cron=cron_like)
def test_any_cron_decodes_or_is_refused(cron):
    body = {"crawl_id": "c", "seeds": ["http://a.example/"], "max_pages": 1, "max_depth": 0, "scope": "host",
            "submitted_at": 1.0, "cron": cron, "type": "crawl_request", "v": 1}
    _decodes_or_refuses(decode_crawl_request, json.dumps(body).encode())


def test_the_built_messages_are_the_decoded_ones():
    # The producer side builds through the same checks: what decodes, builds, and the other way round.
    assert FrontierURL("c", "http://a.example/", 3).depth == 3
    assert CrawlControl("c", "pause", time.time()).action == "pause"
    with pytest.raises(ValueError, match=r"crawl id 'a\.\.\.b' must be"):
        CrawlRequest("a...b", ("http://a.example/",), 1, 0, "host", 1.0)
