"""Message types carried on the Kafka bus and their JSON codecs.

Kept apart from the transport (:mod:`crawl_platform.bus.kafka`): the bus moves bytes, this module
turns them into typed messages and back. Every message has an explicit ``type`` and ``v``
(schema version); a payload that does not decode raises :class:`MessageDecodeError` with a
one-line reason, which the caller routes to the dead-letter topic.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass
from typing import Any

from crawl_platform.config import Scope

_SCOPES = ("host", "domain", "any")
MAX_PAGES_LIMIT = 2**31 - 1  # the store keeps limits as 32-bit integers
MAX_DEPTH_LIMIT = 10_000
_LATEST_TIMESTAMP = 32503680000.0  # year 3000: anything later is not a submission time


class MessageDecodeError(ValueError):
    """A payload that is not a valid message of the expected type; ``str(err)`` is the reason."""


@dataclass(frozen=True)
class CrawlRequest:
    """A crawl submitted by a user: seeds plus limits (seeds topic)."""

    crawl_id: str
    seeds: tuple[str, ...]
    max_pages: int
    max_depth: int
    scope: Scope
    submitted_at: float
    allow_patterns: tuple[str, ...] = ()  # regexes; when given, a URL must match one
    deny_patterns: tuple[str, ...] = ()  # regexes; a URL matching one is skipped
    max_pages_per_host: int = 0  # 0: no per-host cap
    user_agent: str = ""  # empty: the platform's CRAWL_USER_AGENT
    use_sitemaps: bool = False  # also seed from the seed hosts' sitemaps
    TYPE = "crawl_request"
    VERSION = 1


@dataclass(frozen=True)
class FrontierURL:
    """One URL to fetch for a crawl (frontier topic, keyed by host)."""

    crawl_id: str
    url: str
    depth: int
    TYPE = "frontier_url"
    VERSION = 1


@dataclass(frozen=True)
class DeadLetter:
    """A message that could not be processed, with where it came from and why."""

    reason: str
    source_topic: str
    partition: int
    offset: int
    payload_b64: str
    TYPE = "dead_letter"
    VERSION = 1

    @classmethod
    def for_payload(cls, reason: str, topic: str, partition: int, offset: int, payload: bytes) -> DeadLetter:
        return cls(reason, topic, partition, offset, base64.b64encode(payload).decode("ascii"))


Message = CrawlRequest | FrontierURL | DeadLetter


def encode(message: Message) -> bytes:
    """Serialise a message to UTF-8 JSON with its ``type`` and ``v`` fields."""
    body = asdict(message)
    body["type"], body["v"] = message.TYPE, message.VERSION
    return json.dumps(body, separators=(",", ":")).encode()


def _load(payload: bytes | None, expected_type: str, expected_version: int) -> dict[str, Any]:
    if payload is None:
        raise MessageDecodeError("empty payload")
    try:
        body = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MessageDecodeError(f"not JSON: {err}") from None
    if not isinstance(body, dict):
        raise MessageDecodeError("not a JSON object")
    if body.get("type") != expected_type:
        raise MessageDecodeError(f"type is {body.get('type')!r}, expected {expected_type!r}")
    version = body.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version != expected_version:
        raise MessageDecodeError(f"unsupported version {version!r} of {expected_type}")
    return body


def _field(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    # bool is an int subclass; a JSON true must not pass as a page limit.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise MessageDecodeError(f"field {name!r} must be {kind.__name__}, got {value!r}")
    return value


def decode_crawl_request(payload: bytes | None) -> CrawlRequest:
    body = _load(payload, CrawlRequest.TYPE, CrawlRequest.VERSION)
    seeds = _field(body, "seeds", list)
    if not seeds or not all(isinstance(s, str) for s in seeds):
        raise MessageDecodeError("field 'seeds' must be a non-empty list of strings")
    scope = _field(body, "scope", str)
    if scope not in _SCOPES:
        raise MessageDecodeError(f"field 'scope' must be one of {_SCOPES}, got {scope!r}")
    submitted = body.get("submitted_at")
    if (not isinstance(submitted, int | float) or isinstance(submitted, bool)
            or not 0 <= submitted <= _LATEST_TIMESTAMP):  # also false for NaN
        raise MessageDecodeError(f"field 'submitted_at' must be a Unix time, got {submitted!r}")
    max_pages = _field(body, "max_pages", int)
    if not 1 <= max_pages <= MAX_PAGES_LIMIT:
        raise MessageDecodeError(f"field 'max_pages' must be 1..{MAX_PAGES_LIMIT}, got {max_pages}")
    max_depth = _field(body, "max_depth", int)
    if not 0 <= max_depth <= MAX_DEPTH_LIMIT:
        raise MessageDecodeError(f"field 'max_depth' must be 0..{MAX_DEPTH_LIMIT}, got {max_depth}")
    per_host = _optional(body, "max_pages_per_host", int, 0)
    if not 0 <= per_host <= MAX_PAGES_LIMIT:
        raise MessageDecodeError(f"field 'max_pages_per_host' must be 0..{MAX_PAGES_LIMIT}, got {per_host}")
    return CrawlRequest(
        crawl_id=_field(body, "crawl_id", str),
        seeds=tuple(seeds),
        max_pages=max_pages,
        max_depth=max_depth,
        scope=scope,
        submitted_at=float(submitted),
        allow_patterns=_strings(body, "allow_patterns"),
        deny_patterns=_strings(body, "deny_patterns"),
        max_pages_per_host=per_host,
        user_agent=_optional(body, "user_agent", str, ""),
        use_sitemaps=_optional(body, "use_sitemaps", bool, False),
    )


def _optional(body: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    """A field added after v1 was published: absent means ``default``."""
    return default if body.get(name) is None else _field(body, name, kind)


def _strings(body: dict[str, Any], name: str) -> tuple[str, ...]:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MessageDecodeError(f"field {name!r} must be a list of strings, got {value!r}")
    return tuple(value)


def decode_frontier_url(payload: bytes | None) -> FrontierURL:
    body = _load(payload, FrontierURL.TYPE, FrontierURL.VERSION)
    depth = _field(body, "depth", int)
    if depth < 0:
        raise MessageDecodeError(f"field 'depth' must be >= 0, got {depth}")
    return FrontierURL(crawl_id=_field(body, "crawl_id", str), url=_field(body, "url", str), depth=depth)


def decode_dead_letter(payload: bytes | None) -> DeadLetter:
    body = _load(payload, DeadLetter.TYPE, DeadLetter.VERSION)
    return DeadLetter(
        reason=_field(body, "reason", str),
        source_topic=_field(body, "source_topic", str),
        partition=_field(body, "partition", int),
        offset=_field(body, "offset", int),
        payload_b64=_field(body, "payload_b64", str),
    )
