"""Per-crawl schedules: parsing ``--every``/``--cron`` and storing them in ``crawl_schedules``.

A schedule belongs to a crawl family (the crawl id before any ``@``; every pass of a recurring
crawl is ``<family>@<stamp>``). It is set at submission (``CrawlRequest.every_seconds``/``cron``,
written by :func:`record_schedule` in the transaction that registers the crawl) or later by
``crawl-platform schedule`` (:func:`set_schedule`). Which passes are due is
:mod:`crawl_platform.pipeline.schedules`' rule. Cron parsing is croniter's; times are naive UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
from croniter import croniter

from crawl_platform.bus.messages import MAX_PAGES_LIMIT, MIN_EVERY_S, CrawlRequest, cron_problem
from crawl_platform.store import crawls, schedules
from crawl_platform.store.database import CrawlStore

__all__ = ["MIN_EVERY_S", "Schedule", "UnknownCrawlError", "base_id", "parse_every", "parse_schedule",
           "record_schedule", "set_schedule"]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_EVERY = re.compile(r"^(?:\d+[smhdw])+$")


def base_id(crawl_id: str) -> str:
    """The crawl id without its pass suffix: the family every pass of a crawl belongs to."""
    return crawl_id.split("@", 1)[0]


class UnknownCrawlError(ValueError):
    """``schedule`` named a crawl the lake does not know."""


@dataclass(frozen=True)
class Schedule:
    """Either a fixed interval (seconds) or a cron expression (UTC)."""

    every_seconds: int = 0
    cron: str = ""

    @property
    def period_seconds(self) -> int:
        """The interval, or the gap between a cron schedule's first two ticks after 2000-01-01."""
        if self.every_seconds:
            return self.every_seconds
        ticks = croniter(self.cron, datetime(2000, 1, 1))
        first = ticks.get_next(datetime)
        return int((ticks.get_next(datetime) - first).total_seconds())

    def next_after(self, when: datetime) -> datetime:
        if self.every_seconds:
            return when + timedelta(seconds=self.every_seconds)
        tick: datetime = croniter(self.cron, when).get_next(datetime)
        return tick

    def describe(self) -> str:
        return f"every {self.every_seconds}s" if self.every_seconds else f"cron {self.cron!r}"


def parse_every(text: str) -> int:
    """``90s``, ``30m``, ``6h``, ``1d``, ``2w`` or a sum such as ``1h30m``, in seconds."""
    compact = text.strip().lower().replace(" ", "")
    if not _EVERY.match(compact):
        raise ValueError(f"interval {text!r} must be a number and a unit s, m, h, d or w, e.g. 6h or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhdw])", compact))
    if not MIN_EVERY_S <= seconds <= MAX_PAGES_LIMIT:
        raise ValueError(f"interval {text!r} must be between 1m and {MAX_PAGES_LIMIT // 86400}d")
    return seconds


def parse_schedule(every: str | int | None = None, cron: str | None = None) -> Schedule | None:
    """The schedule a user asked for, or None; raises ValueError with a one-line reason."""
    if every and cron:
        raise ValueError("give --every or --cron, not both")
    if cron:
        problem = cron_problem(cron)
        if problem is not None:
            raise ValueError(problem)
        return Schedule(cron=" ".join(cron.split()))
    if every:
        seconds = every if isinstance(every, int) else parse_every(every)
        if not MIN_EVERY_S <= seconds <= MAX_PAGES_LIMIT:
            raise ValueError(f"interval must be between {MIN_EVERY_S} and {MAX_PAGES_LIMIT} seconds, not {seconds}")
        return Schedule(every_seconds=seconds)
    return None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def record_schedule(con: duckdb.DuckDBPyConnection, request: CrawlRequest) -> None:
    """At registration: the schedule a submission carries, unless its family has one already (a
    message delivered again must not undo a later ``schedule`` command)."""
    if not (request.every_seconds or request.cron):
        return
    schedule = Schedule(request.every_seconds, request.cron)
    schedules.insert_schedule(con, base_id(request.crawl_id), schedule.every_seconds or None, schedule.cron or None,
                              schedule.period_seconds, _now())


def set_schedule(store: CrawlStore, crawl_id: str, schedule: Schedule | None) -> str:
    """Set (or, with None, turn off) the schedule of a crawl's family; returns the family. Raises
    :class:`UnknownCrawlError` when no crawl of that id or family is registered."""
    family = base_id(crawl_id)
    with store.write() as con:
        if not crawls.family_registered(con, crawl_id, family):
            raise UnknownCrawlError(f"no crawl {crawl_id!r} (see crawl-platform status)")
        old = schedules.schedule_of(con, family)
        if schedule is None and old is None:
            return family
        every, cron, period = ((schedule.every_seconds or None, schedule.cron or None, schedule.period_seconds)
                               if schedule else old)  # type: ignore[misc]
        schedules.replace_schedule(con, family, every, cron, period, schedule is not None, _now())
    return family


