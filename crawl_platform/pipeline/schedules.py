"""Which recurring passes are due: the one rule the ``recurring_crawls`` sensor asks each tick.

A scheduled family (:mod:`crawl_platform.frontier.schedules`) is due when its schedule's next tick
after its latest pass's submission has come and that pass has no pending URL (passes never
overlap). The pass it gets keeps every option of the latest one
(:func:`crawl_platform.pipeline.recrawl.pass_request`) and fetches only what its revisit state says
is due, plus new links (:mod:`crawl_platform.store.revisits`). The plan also says which families
fell behind: their last completed pass is older than 1.5 periods. Reads only; times naive UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.frontier.schedules import Schedule, base_id
from crawl_platform.pipeline.recrawl import latest_passes, pass_request
from crawl_platform.store import schedules as schedule_rows
from crawl_platform.store.database import CrawlStore

LATE_FACTOR = 1.5  # a family whose last completed pass is older than this many periods is late


@dataclass(frozen=True)
class FamilyState:
    """One scheduled family as the sensor saw it."""

    family: str
    schedule: Schedule
    latest_pass: str
    running: bool  # the latest pass still has pending URLs
    last_completed_at: datetime | None  # when the latest finished pass fetched its last URL
    next_pass_at: datetime

    def late(self, now: datetime) -> bool:
        """The last completed pass is older than 1.5 periods (or none completed within them)."""
        reference = self.last_completed_at or self.next_pass_at - timedelta(seconds=self.schedule.period_seconds)
        return (now - reference).total_seconds() > LATE_FACTOR * self.schedule.period_seconds


@dataclass(frozen=True)
class DuePlan:
    passes: list[CrawlRequest]
    families: list[FamilyState]


def plan_due_passes(store: CrawlStore, now: datetime) -> DuePlan:
    """The passes due at ``now`` (naive UTC), one per active scheduled family at most, with ids
    ``<family>@<YYYYMMDDTHHMM>``, and the state of every scheduled family."""
    if not store.exists():
        return DuePlan([], [])
    with store.read() as con:
        schedules = {family: Schedule(every or 0, cron or "")
                     for family, every, cron in schedule_rows.active_schedules(con)}
    if not schedules:
        return DuePlan([], [])
    with store.read() as con:
        progress = {crawl_id: (pending, last) for crawl_id, pending, last in schedule_rows.scheduled_progress(con)}
    completed: dict[str, datetime] = {}
    for crawl_id, (pending, last) in progress.items():
        family = base_id(crawl_id)
        if not pending and (family not in completed or last > completed[family]):
            completed[family] = last
    latest = latest_passes(store)
    passes, families = [], []
    for family, schedule in sorted(schedules.items()):
        if family not in latest:
            continue
        last_id, submitted_at, options = latest[family]
        running = bool(progress.get(last_id, (0, None))[0])
        next_at = schedule.next_after(submitted_at)
        families.append(FamilyState(family, schedule, last_id, running, completed.get(family), next_at))
        if now >= next_at and not running:
            passes.append(pass_request(f"{family}@{now:%Y%m%dT%H%M}", options, now))
    return DuePlan(passes, families)
