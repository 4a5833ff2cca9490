"""Cuts a Kafka topic's backlog into batches: offset ranges per partition, from watermarks alone.

The sensors call :func:`plan_batches` each tick with the topic's watermarks and the offsets they
have already handed out (their cursor). No message is read, so a tick costs one round trip per
partition whatever the backlog. A high watermark below the cursor means the broker lost its log
(the embedded broker keeps data in memory): the partition restarts from its low watermark and
the plan says so, so the caller can re-publish from the store what the broker forgot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from crawl_platform.bus import OffsetRange


@dataclass(frozen=True)
class BatchPlan:
    ranges: list[OffsetRange]
    cursor: dict[int, int]
    lost_partitions: list[int] = field(default_factory=list)
    backlog: int = 0  # messages left unplanned after this tick


def plan_batches(
    watermarks: dict[int, tuple[int, int]],
    cursor: dict[int, int],
    batch_size: int,
    max_batches: int,
) -> BatchPlan:
    """Ranges of at most ``batch_size`` offsets, oldest first and round-robin over partitions,
    at most ``max_batches`` of them; returns the advanced cursor."""
    next_offset = dict(cursor)
    lost = []
    for part, (low, high) in watermarks.items():
        seen = next_offset.get(part)
        if seen is None or seen < low:
            next_offset[part] = low
        elif seen > high:
            lost.append(part)
            next_offset[part] = low
    ranges: list[OffsetRange] = []
    progressing = True
    while progressing and len(ranges) < max_batches:
        progressing = False
        for part in sorted(watermarks):
            if len(ranges) >= max_batches:
                break
            start, high = next_offset[part], watermarks[part][1]
            if start < high:
                end = min(start + batch_size, high)
                ranges.append(OffsetRange(part, start, end))
                next_offset[part] = end
                progressing = True
    backlog = sum(max(0, watermarks[p][1] - next_offset[p]) for p in watermarks)
    return BatchPlan(ranges, next_offset, lost, backlog)


def encode_cursor(cursor: dict[int, int], epoch: int = 0) -> str:
    return json.dumps({"epoch": epoch, "offsets": {str(k): v for k, v in sorted(cursor.items())}})


def decode_cursor(raw: str | None) -> tuple[dict[int, int], int]:
    """Offsets and epoch from a sensor cursor; an empty or unreadable cursor starts from scratch."""
    if not raw:
        return {}, 0
    try:
        body = json.loads(raw)
        return {int(k): int(v) for k, v in body["offsets"].items()}, int(body.get("epoch", 0))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return {}, 0


def batch_key(epoch: int, offsets: OffsetRange) -> str:
    """Dagster partition key of a frontier batch; the epoch changes when the broker lost its log,
    so offsets reused by a fresh broker never collide with batches already run."""
    return f"e{epoch}.{offsets.key}"


def parse_batch_key(key: str) -> tuple[int, OffsetRange]:
    """Inverse of :func:`batch_key` (raises ValueError on anything else)."""
    epoch, _, rest = key.partition(".")
    if not epoch.startswith("e") or not epoch[1:].isdigit():
        raise ValueError(f"not a batch key: {key!r}")
    return int(epoch[1:]), OffsetRange.parse(rest)
