"""One valid message of each kind that the bus codec tests start from, and a message's JSON body and back.

The wire tests (``test_messages.py``) and the field tests (``test_message_fields.py``) both change
one thing in these and decode the result, so the messages and the two helpers live here once.
"""

from __future__ import annotations

import json

from crawl_platform.bus.messages import CrawlControl, CrawlRequest, DeadLetter, FrontierURL, encode

REQUEST = CrawlRequest("c-1", ("http://a.example/", "http://b.example/x"), 500, 3, "domain", 1_700_000_000.25)
FRONTIER = FrontierURL("c-1", "http://a.example/page?x=1", 2)
LETTER = DeadLetter.for_payload("not JSON: boom", "crawl.frontier", 3, 42, b"\x00\xffraw")
CONTROL = CrawlControl("c-1", "pause", 1_700_000_000.5)


def body_of(message) -> dict:
    """The JSON object ``message`` is encoded as."""
    return json.loads(encode(message))


def payload_of(body: dict) -> bytes:
    """``body`` as the bytes a consumer reads."""
    return json.dumps(body).encode()
