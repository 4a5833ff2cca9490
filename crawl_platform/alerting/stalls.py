"""When a crawl counts as stalled, and which stalls are new (one alert per stall, not per tick).

A crawl is stalled when it has pending URLs (``discovered`` or ``queued``) and none of its URLs
finished (fetched, failed or disallowed) for ``CRAWL_STALL_MINUTES``; its last progress is the
read model's ``last_update``, or its registration when nothing finished yet. The lake already
knows all of it, so detection needs no state; deduplication needs only which stalls were
alerted: :class:`StallLedger` maps each crawl to the last-progress time of the stall it alerted,
and the sensor keeps it in its cursor. A stall that ends (progress) leaves the ledger; if the
crawl stalls again later its last progress is newer, so that is a new stall and alerts again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from crawl_platform.frontier.read_model import CrawlStatus
from crawl_platform.states import CrawlState


@dataclass(frozen=True)
class Stall:
    crawl_id: str
    pending: int
    last_progress: datetime

    def idle_minutes(self, now: datetime) -> float:
        return (now - self.last_progress).total_seconds() / 60.0

    @property
    def key(self) -> str:
        return self.last_progress.isoformat()


def find_stalls(statuses: Iterable[CrawlStatus], now: datetime, stall_after: timedelta) -> list[Stall]:
    """The active crawls with pending URLs whose last progress is at least ``stall_after`` before
    ``now`` (naive UTC, as the lake's timestamps). A paused or cancelled crawl is not stalled: it
    was stopped on purpose."""
    stalls = []
    for status in statuses:
        last = max(status.last_update or status.registered_at, status.registered_at)
        if status.state == CrawlState.ACTIVE and status.pending > 0 and now - last >= stall_after:
            stalls.append(Stall(status.crawl_id, status.pending, last))
    return stalls


@dataclass
class StallLedger:
    """The stalls already alerted: crawl id → the stall's last-progress time (ISO)."""

    alerted: dict[str, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: str | None) -> StallLedger:
        """From a sensor cursor; an empty or unreadable one alerts current stalls again."""
        try:
            body = json.loads(raw or "{}")
            return cls({str(k): str(v) for k, v in body.get("stalls", {}).items()})
        except (ValueError, AttributeError):
            return cls()

    def encode(self) -> str:
        return json.dumps({"stalls": dict(sorted(self.alerted.items()))})

    def new(self, stalls: list[Stall]) -> list[Stall]:
        """The stalls not alerted yet."""
        return [s for s in stalls if self.alerted.get(s.crawl_id) != s.key]

    def settle(self, current: list[Stall], sent: list[Stall]) -> None:
        """Keep the stalls still going that were alerted before or just now; forget ended ones."""
        sent_keys = {(s.crawl_id, s.key) for s in sent}
        self.alerted = {s.crawl_id: s.key for s in current
                        if self.alerted.get(s.crawl_id) == s.key or (s.crawl_id, s.key) in sent_keys}
