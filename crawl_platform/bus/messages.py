"""Message types carried on the Kafka bus and their JSON codecs.

Kept apart from the transport (:mod:`crawl_platform.bus.kafka`): the bus moves bytes, this module
turns them into typed messages and back. Every message has an explicit ``type`` and ``v``
(schema version); a payload that does not decode raises :class:`MessageDecodeError` with a
one-line reason, which the caller routes to the dead-letter topic.

Each message is a frozen pydantic dataclass whose annotated fields are its schema, checked when a
message is built and when one is decoded. Decoding is strict (a JSON ``true`` is not an integer, a
number is not a string) and runs in pydantic's JSON validator, since a frontier batch decodes
thousands. Encoding writes compact JSON whose bytes do not change from release to release: the
fields in declaration order (those a type lists in ``OMITTED_WHEN_EMPTY`` left out while at their
default), then ``type`` and ``v``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import time
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar, get_args, get_origin

from annotated_types import Ge, Le, MinLen
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, Strict, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass, is_pydantic_dataclass
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from crawl_platform.config import Scope

MAX_PAGES_LIMIT = 2**31 - 1  # the store keeps limits as 32-bit integers
MAX_DEPTH_LIMIT = 10_000
MAX_HOST_DELAY_MS = 3_600_000  # an hour between two requests: anything above is a typo
MAX_HOST_CONCURRENCY = 64
MAX_PRIORITY = 1_000_000
MAX_USER_AGENT_LENGTH = 512
MIN_EVERY_S = 60  # the recurring-crawls sensor looks once a minute
MAX_CLOCK_SKEW_S = 300.0
"""How far in the future a message's time (``submitted_at``, ``issued_at``) may be: a producer's
clock may run ahead of this machine's by this much. A later time is refused, since the
control state orders commands by it and a command dated years ahead would outrank every later one."""
_LATEST_TIMESTAMP = 32503680000.0  # year 3000: a bound pydantic checks before the clock is read
_STRICT = ConfigDict(strict=True)

CRAWL_ID_RULE = ("1-128 letters, digits, '.', '_' or '-', starting with a letter or digit, without '..'; "
                 "'@' only in the passes of recurring crawls (<id>@<stamp>)")
"""The crawl-id pattern in words, as errors and docs/limits.md give it."""
_CRAWL_ID = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,127}(?:@[A-Za-z0-9]{1,32})?")


def crawl_id_problem(crawl_id: str) -> str | None:
    """Why ``crawl_id`` is not a valid crawl id, or None. A valid id is safe as a Dagster partition
    key, a file name and (made a view name by replacing its punctuation) a SQL identifier."""
    if _CRAWL_ID.fullmatch(crawl_id):
        return None
    return f"crawl id {crawl_id[:140]!r} must be {CRAWL_ID_RULE}"


def cron_problem(cron: str) -> str | None:
    """Why ``cron`` is not a 5-field cron expression croniter accepts, or None."""
    from croniter import croniter  # noqa: PLC0415 - only crawl requests with a schedule need it

    try:
        valid = len(cron.split()) == 5 and bool(croniter.is_valid(cron))
    except Exception:  # croniter raises several kinds on odd input: all mean "not valid"
        valid = False
    return None if valid else f"cron schedule {cron[:100]!r} is not a valid 5-field cron expression, e.g. '0 * * * *'"


def _check(problem: Any) -> AfterValidator:
    """A validator that raises ValueError with ``problem(value)`` when it is not None."""

    def validate(value: Any) -> Any:
        reason = problem(value)
        if reason is not None:
            raise ValueError(reason)
        return value

    return AfterValidator(validate)


def _not_ahead(when: float) -> str | None:
    ahead = when - time.time()
    return (f"{when} is {ahead:.0f} s ahead of this machine's clock (at most {MAX_CLOCK_SKEW_S:.0f} s)"
            if ahead > MAX_CLOCK_SKEW_S else None)


def _patterns_problem(patterns: tuple[str, ...]) -> str | None:
    from crawl_platform.patterns import PatternError, check_patterns  # noqa: PLC0415 - RE2 only for requests

    try:
        check_patterns(patterns)
    except PatternError as err:
        return str(err)
    return None


def _rules_problem(rules: str) -> str | None:
    if not rules:
        return None
    from crawl_platform.extract.rules import RulesError, rules_from_json  # noqa: PLC0415 - only rules need lxml

    try:
        rules_from_json(rules, "extract_rules")  # written out in full by the producer
    except RulesError as err:
        return str(err)
    return None


def _user_agent_problem(agent: str) -> str | None:
    if len(agent) > MAX_USER_AGENT_LENGTH:
        return f"user agent is longer than {MAX_USER_AGENT_LENGTH} characters"
    return "user agent must be one line" if any(ch in agent for ch in "\r\n") else None


def _every_problem(seconds: int) -> str | None:
    return (f"an interval must be 0 (none) or at least {MIN_EVERY_S} seconds, not {seconds}"
            if 0 < seconds < MIN_EVERY_S else None)


def _null_is_default(default: Any) -> BeforeValidator:
    """For a field added after v1 was published: ``null`` means the default, as absence does."""
    return BeforeValidator(lambda value: default if value is None else value)


CrawlId = Annotated[str, _check(crawl_id_problem)]
RenderMode = Literal["never", "always", "auto"]
RENDER_MODES: tuple[str, ...] = get_args(RenderMode)
_Time = Annotated[float, Field(ge=0, le=_LATEST_TIMESTAMP, allow_inf_nan=False, description="a Unix time"),
                  _check(_not_ahead)]
# A list of strings that older producers leave out or send as null. The validator before the
# tuple hands it a Python list, which only a lax tuple accepts; the items stay strict strings.
_Patterns = Annotated[tuple[StrictStr, ...], Strict(False), _null_is_default(()), _check(_patterns_problem)]


class MessageDecodeError(ValueError):
    """A payload that is not a valid message of the expected type; ``str(err)`` is the reason."""


@dataclass(frozen=True, config=_STRICT)
class CrawlRequest:
    """A crawl submitted by a user: seeds plus limits (seeds topic)."""

    crawl_id: CrawlId
    seeds: Annotated[tuple[str, ...], Field(min_length=1)]
    max_pages: Annotated[int, Field(ge=1, le=MAX_PAGES_LIMIT)]
    max_depth: Annotated[int, Field(ge=0, le=MAX_DEPTH_LIMIT)]
    scope: Scope
    submitted_at: _Time
    allow_patterns: _Patterns = ()  # RE2 regexes; when given, a URL must match one
    deny_patterns: _Patterns = ()  # RE2 regexes; a URL matching one is skipped
    max_pages_per_host: Annotated[int, Field(ge=0, le=MAX_PAGES_LIMIT), _null_is_default(0)] = 0  # 0: no cap
    # empty: the platform's CRAWL_USER_AGENT
    user_agent: Annotated[str, _null_is_default(""), _check(_user_agent_problem)] = ""
    use_sitemaps: Annotated[bool, _null_is_default(False)] = False  # also seed from the seed hosts' sitemaps
    # 0: no interval
    every_seconds: Annotated[int, Field(ge=0, le=MAX_PAGES_LIMIT), _null_is_default(0), _check(_every_problem)] = 0
    # a 5-field cron schedule (UTC); empty: none; with an interval too, the interval is the schedule
    cron: Annotated[str, _null_is_default(""), _check(lambda cron: cron_problem(cron) if cron else None)] = ""
    # The crawl's own politeness and priority; 0 is the platform's default. The fetch step and the
    # frontier sensor clamp them to the operator's limits (CRAWL_MIN_HOST_DELAY_MS and friends).
    host_delay_ms: Annotated[int, Field(ge=0, le=MAX_HOST_DELAY_MS), _null_is_default(0)] = 0
    host_concurrency: Annotated[int, Field(ge=0, le=MAX_HOST_CONCURRENCY), _null_is_default(0)] = 0
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY), _null_is_default(0)] = 0
    # extraction rules, canonical JSON; empty: none
    extract_rules: Annotated[str, _null_is_default(""), _check(_rules_problem)] = ""
    # JavaScript rendering: never, always, or auto (over HTTP first, rendered when a page needs it)
    render: Annotated[RenderMode, _null_is_default("never")] = "never"
    screenshots: Annotated[bool, _null_is_default(False)] = False  # a screenshot of each rendered page, archived
    TYPE: ClassVar[str] = "crawl_request"
    VERSION: ClassVar[int] = 1
    # Left off the wire while at their default, so a request that sets none of them is one a
    # consumer that does not know these fields reads as well.
    OMITTED_WHEN_EMPTY: ClassVar[frozenset[str]] = frozenset({"extract_rules", "render", "screenshots"})


@dataclass(frozen=True, config=_STRICT)
class FrontierURL:
    """One URL to fetch for a crawl (frontier topic, keyed by host)."""

    crawl_id: CrawlId
    url: str
    depth: Annotated[int, Field(ge=0, le=MAX_DEPTH_LIMIT)]
    TYPE: ClassVar[str] = "frontier_url"
    VERSION: ClassVar[int] = 1


@dataclass(frozen=True, config=_STRICT)
class DeadLetter:
    """A message that could not be processed, with where it came from and why."""

    reason: str
    source_topic: str
    partition: int
    offset: int
    payload_b64: str
    TYPE: ClassVar[str] = "dead_letter"
    VERSION: ClassVar[int] = 1

    @classmethod
    def for_payload(cls, reason: str, topic: str, partition: int, offset: int, payload: bytes) -> DeadLetter:
        return cls(reason, topic, partition, offset, base64.b64encode(payload).decode("ascii"))


@dataclass(frozen=True, config=_STRICT)
class PageEvent:
    """One landed page version, for subscribers outside the platform (pages topic, keyed by URL).
    Published after the landing committed, at least once: a subscriber may see a version twice,
    and ``(url, version)`` is the key to deduplicate on."""

    url: str
    crawl_id: str
    version: Annotated[int, Field(ge=1)]
    status: Annotated[int | None, Field(description="an HTTP status or null (no response)")]
    content_hash: str
    fetched_at: Annotated[str, Field(description="an ISO 8601 time (UTC)")]
    batch_id: str
    error: Annotated[str | None, Field(description="a string or null")] = None
    # Where the version's response is archived (pages.warc_file/offset/length); null without one.
    warc_file: Annotated[str | None, Field(description="a string or null")] = None
    warc_offset: Annotated[int | None, Field(description="an integer or null")] = None
    warc_length: Annotated[int | None, Field(description="an integer or null")] = None
    TYPE: ClassVar[str] = "page"
    VERSION: ClassVar[int] = 1



ControlAction = Literal["cancel", "pause", "resume"]


@dataclass(frozen=True, config=_STRICT)
class CrawlControl:
    """A user's command for one crawl (control topic, keyed by crawl id): cancel, pause or resume.
    ``issued_at`` orders commands: one older than the crawl's last applied command changes nothing."""

    crawl_id: CrawlId
    action: ControlAction
    issued_at: _Time
    TYPE: ClassVar[str] = "crawl_control"
    VERSION: ClassVar[int] = 1


Message = CrawlRequest | FrontierURL | DeadLetter | PageEvent | CrawlControl
_M = TypeVar("_M", bound=Message)


@dataclass(frozen=True)
class _Envelope:
    """What every message carries, read before the message itself so that a payload of another
    type or version is named as such rather than by its first unexpected field."""

    type: Any = None
    v: Any = None


_ENVELOPE = TypeAdapter(_Envelope)
_RANGE_ERRORS = frozenset({"greater_than_equal", "less_than_equal", "finite_number"})  # reported by _range


class _Codec(Generic[_M]):
    """The JSON codec of one message type."""

    def __init__(self, cls: type[_M]) -> None:
        self.cls = cls
        self._adapter = TypeAdapter(cls)
        self._fields = tuple(f.name for f in dataclasses.fields(cls))
        self._omitted_when_empty: frozenset[str] = getattr(cls, "OMITTED_WHEN_EMPTY", frozenset())
        self._defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        infos = _field_infos(cls)
        self._kinds = {name: _kind(info) for name, info in infos.items()}
        self._ranges = {name: _range(info) for name, info in infos.items()}

    def encode(self, message: _M) -> bytes:
        # json.dumps, not pydantic's serialiser: that one writes non-ASCII characters unescaped and
        # some floats differently (1e-05 as 0.00001), and the wire format must not change.
        body = {name: getattr(message, name) for name in self._fields}
        for name in self._omitted_when_empty:
            if body[name] == self._defaults[name]:
                del body[name]
        body["type"], body["v"] = self.cls.TYPE, self.cls.VERSION
        return json.dumps(body, separators=(",", ":")).encode()

    def decode(self, payload: bytes | None) -> _M:
        if payload is None:
            raise MessageDecodeError("empty payload")
        try:
            envelope = _ENVELOPE.validate_json(payload)
        except ValidationError as err:
            raise MessageDecodeError(self._reason(err.errors(include_url=False)[0])) from None
        kind, version = envelope.type, envelope.v
        if kind != self.cls.TYPE:
            raise MessageDecodeError(f"type is {kind!r}, expected {self.cls.TYPE!r}")
        if type(version) is not int or version != self.cls.VERSION:  # a JSON true is no version
            raise MessageDecodeError(f"unsupported version {version!r} of {self.cls.TYPE}")
        try:
            return self._adapter.validate_json(payload)
        except ValidationError as err:
            raise MessageDecodeError(self._reason(err.errors(include_url=False)[0])) from None
        except (RecursionError, MemoryError, OverflowError) as err:  # a check above met a pathological value
            raise MessageDecodeError(f"a field is too large or too deeply nested ({type(err).__name__})") from None

    def _reason(self, error: ErrorDetails) -> str:
        """One line naming the field and what is wrong with it (pydantic's own text spans lines)."""
        loc = error["loc"]
        if error["type"] == "json_invalid":
            reason = f"not JSON: {error.get('ctx', {}).get('error', error['msg'])}"
        elif error["type"] == "value_error":  # one of the checks above, which says what is wrong
            message = str(error.get("ctx", {}).get("error", error["msg"]))
            reason = f"field {loc[0]!r}: {message}" if loc else message
        elif not loc:
            reason = "not a JSON object" if error["type"] == "dataclass_type" else error["msg"]
        elif error["type"] == "missing":
            reason = f"field {loc[0]!r} is missing"
        else:
            name = str(loc[0])
            rule = self._ranges[name] if error["type"] in _RANGE_ERRORS else self._kinds[name]
            where = f" at index {loc[1]}" if len(loc) > 1 else ""
            reason = f"field {name!r} must be {rule}, got {error['input']!r}{where}"
        return " ".join(reason.splitlines())


def _field_infos(cls: type) -> dict[str, FieldInfo]:
    """The pydantic fields of a message class: annotation, constraints, description."""
    if not is_pydantic_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a pydantic dataclass")
    return cls.__pydantic_fields__


_KINDS: dict[Any, str] = {str: "a string", int: "an integer", bool: "true or false", float: "a number"}


def _kind(info: FieldInfo) -> str:
    """What a field holds, as a decode error says it: its description, else e.g. ``a string``."""
    if info.description:
        return info.description
    if get_origin(info.annotation) is tuple:
        non_empty = any(isinstance(m, MinLen) and m.min_length > 0 for m in info.metadata)
        return "a non-empty list of strings" if non_empty else "a list of strings"
    if get_origin(info.annotation) is Literal:
        return f"one of {get_args(info.annotation)}"
    return _KINDS[info.annotation]  # a KeyError here: name the new field type above


def _range(info: FieldInfo) -> str:
    """The bounds of a numeric field, as a decode error says them: ``1..2147483647`` or ``>= 0``."""
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    return f">= {low}" if high is None else f"{low}..{high}"


_CRAWL_REQUEST = _Codec(CrawlRequest)
_FRONTIER_URL = _Codec(FrontierURL)
_DEAD_LETTER = _Codec(DeadLetter)
_PAGE_EVENT = _Codec(PageEvent)
_CRAWL_CONTROL = _Codec(CrawlControl)
_CODECS: dict[type[Message], _Codec[Any]] = {
    c.cls: c for c in (_CRAWL_REQUEST, _FRONTIER_URL, _DEAD_LETTER, _PAGE_EVENT, _CRAWL_CONTROL)}


def encode(message: Message) -> bytes:
    """Serialise a message to UTF-8 JSON with its ``type`` and ``v`` fields."""
    return _CODECS[type(message)].encode(message)


def decode_crawl_request(payload: bytes | None) -> CrawlRequest:
    return _CRAWL_REQUEST.decode(payload)


def decode_frontier_url(payload: bytes | None) -> FrontierURL:
    return _FRONTIER_URL.decode(payload)


def decode_dead_letter(payload: bytes | None) -> DeadLetter:
    return _DEAD_LETTER.decode(payload)


def decode_page_event(payload: bytes | None) -> PageEvent:
    return _PAGE_EVENT.decode(payload)


def decode_crawl_control(payload: bytes | None) -> CrawlControl:
    return _CRAWL_CONTROL.decode(payload)
