"""Cuts a Kafka topic's backlog into batches: offset ranges per partition, from watermarks alone.

The sensors call :func:`plan_batches` each tick with the topic's watermarks and the offsets they
have already handed out (their cursor). No message is read, so a tick costs one round trip per
partition whatever the backlog. A high watermark below the cursor means the broker lost its log
(the embedded broker keeps data in memory): the partition restarts from its low watermark and
the plan says so, so the caller can re-publish from the store what the broker forgot.

A batch is a list of ranges, one per partition of a *partition group* (partition ``p`` is in
group ``p % groups``). A run thus fetches the hosts of several partitions side by side, which is
what keeps throughput up when every host is slowed down by its politeness delay, while two runs
never share a partition, so a host (always in one partition) is only ever fetched by one run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: the unit a crawl batch is cut into."""

    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.partition < 0 or self.start < 0 or self.end <= self.start:
            raise ValueError(f"invalid offset range {self}")

    @property
    def key(self) -> str:
        return f"p{self.partition}-{self.start}-{self.end}"

    @classmethod
    def parse(cls, key: str) -> OffsetRange:
        """Inverse of :attr:`key` (raises ValueError on anything else)."""
        try:
            part, start, end = key.split("-")
            if not part.startswith("p"):
                raise ValueError(key)
            return cls(int(part[1:]), int(start), int(end))
        except ValueError:
            raise ValueError(f"not an offset range key: {key!r}") from None


Batch = list[OffsetRange]


@dataclass(frozen=True)
class BatchPlan:
    batches: list[Batch]
    cursor: dict[int, int]
    lost_partitions: list[int] = field(default_factory=list)
    backlog: int = 0  # messages left unplanned after this tick

    @property
    def ranges(self) -> list[OffsetRange]:
        """Every planned range, batch after batch."""
        return [r for batch in self.batches for r in batch]


def plan_batches(
    watermarks: dict[int, tuple[int, int]],
    cursor: dict[int, int],
    batch_size: int,
    max_batches: int,
    groups: int = 0,
    priorities: Mapping[int, int] | None = None,
    rounds: int = 0,
) -> BatchPlan:
    """Batches of at most ``batch_size`` offsets per partition, oldest first, at most
    ``max_batches`` of them, and at most ``rounds`` per group (0: no limit); returns the
    advanced cursor.

    Partitions are split into ``groups`` groups (0: one group per partition); each batch holds
    the next range of every partition of one group that has new messages. Rounds go over the
    groups in turn, so every group gets its first batch before any gets a second; within a round,
    groups holding a higher-priority partition (``priorities``: partition -> priority, 0 when
    absent) come first, so when ``max_batches`` cuts, they get the room.
    """
    next_offset = dict(cursor)
    lost = []
    for part, (low, high) in watermarks.items():
        seen = next_offset.get(part)
        if seen is None or seen < low:
            next_offset[part] = low
        elif seen > high:
            lost.append(part)
            next_offset[part] = low
    n_groups = groups if groups > 0 else max(len(watermarks), 1)
    members: dict[int, list[int]] = {}
    for part in sorted(watermarks):
        members.setdefault(part % n_groups, []).append(part)
    rank = priorities or {}
    order = sorted(members, key=lambda g: (-max(rank.get(p, 0) for p in members[g]), g))
    batches: list[Batch] = []
    progressing = True
    done_rounds = 0
    while progressing and len(batches) < max_batches and not (rounds and done_rounds >= rounds):
        progressing = False
        done_rounds += 1
        for group in order:
            if len(batches) >= max_batches:
                break
            batch: Batch = []
            for part in members[group]:
                start, high = next_offset[part], watermarks[part][1]
                if start < high:
                    end = min(start + batch_size, high)
                    batch.append(OffsetRange(part, start, end))
                    next_offset[part] = end
            if batch:
                batches.append(batch)
                progressing = True
    backlog = sum(max(0, watermarks[p][1] - next_offset[p]) for p in watermarks)
    return BatchPlan(batches, next_offset, lost, backlog)


def encode_cursor(cursor: dict[int, int], epoch: int = 0, topic_id: str | None = None) -> str:
    body: dict[str, object] = {"epoch": epoch, "offsets": {str(k): v for k, v in sorted(cursor.items())}}
    if topic_id:
        body["topic_id"] = topic_id
    return json.dumps(body)


def cursor_topic_id(raw: str | None) -> str | None:
    """The topic id a cursor's offsets belong to (None if it holds none)."""
    try:
        value = json.loads(raw or "").get("topic_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def cursor_number(raw: str | None, name: str) -> float | None:
    """A number a sensor keeps in its cursor beside the offsets (None when absent or unreadable)."""
    try:
        value = json.loads(raw or "").get(name)
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def with_cursor_number(raw: str, name: str, value: float) -> str:
    """``raw`` (an encoded cursor) with ``name`` set to ``value``; :func:`decode_cursor` ignores it."""
    body = json.loads(raw)
    body[name] = value
    return json.dumps(body)


def decode_cursor(raw: str | None) -> tuple[dict[int, int], int]:
    """Offsets and epoch from a sensor cursor; an empty or unreadable cursor starts from scratch."""
    if not raw:
        return {}, 0
    try:
        body = json.loads(raw)
        return {int(k): int(v) for k, v in body["offsets"].items()}, int(body.get("epoch", 0))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return {}, 0


def batch_key(epoch: int, batch: OffsetRange | Batch) -> str:
    """Dagster partition key of a frontier batch, e.g. ``e0.p1-0-200+p5-40-90``; the epoch changes
    when the broker lost its log, so offsets reused by a fresh broker never collide with batches
    already run."""
    ranges = [batch] if isinstance(batch, OffsetRange) else batch
    if not ranges:
        raise ValueError("a batch holds at least one offset range")
    return f"e{epoch}." + "+".join(r.key for r in sorted(ranges, key=lambda r: r.partition))


def parse_batch_key(key: str) -> tuple[int, Batch]:
    """Inverse of :func:`batch_key` (raises ValueError on anything else)."""
    epoch, _, rest = key.partition(".")
    if not epoch.startswith("e") or not epoch[1:].isdigit() or not rest:
        raise ValueError(f"not a batch key: {key!r}")
    ranges = [OffsetRange.parse(part) for part in rest.split("+")]
    if len({r.partition for r in ranges}) != len(ranges):
        raise ValueError(f"not a batch key (a partition twice): {key!r}")
    return int(epoch[1:]), ranges


def partitions_of(batch: Batch) -> list[int]:
    return sorted(r.partition for r in batch)
