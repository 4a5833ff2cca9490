"""Recurring crawls: which crawls to submit again, under which new ids, with every option kept.

A crawl id is one pass over a site; a recurring pass is a new crawl with the id
``<base>@<stamp>`` and *every* option of the family's latest pass (seeds, limits, scope, allow and
deny patterns, per-host cap, User-Agent, sitemaps flag, rendering), so its versions land next to the first
pass's and it stays in the scope the user set. :func:`pass_request` builds one pass;
:func:`plan_recrawls` is the daily plan of the ``recrawl_daily`` schedule, and
:mod:`crawl_platform.pipeline.schedules` the per-crawl plan of the ``recurring_crawls`` sensor.
Nothing here writes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.frontier.schedules import base_id
from crawl_platform.store import crawls
from crawl_platform.store.database import CrawlStore


def pass_request(pass_id: str, row: tuple[Any, ...], at: datetime) -> CrawlRequest:
    """A pass submitted at ``at`` with the options of an ``OPTION_COLUMNS`` row of ``crawls``
    (:mod:`crawl_platform.store.crawls`; columns that older lakes lack are NULL: their defaults)."""
    seeds, max_pages, max_depth, scope, allow, deny, per_host, agent, sitemaps, delay_ms, concurrency, priority, \
        rules, render, screenshots = row
    return CrawlRequest(pass_id, tuple(seeds), max_pages, max_depth, scope, at.replace(tzinfo=UTC).timestamp(),
                        tuple(allow or ()), tuple(deny or ()), per_host or 0, agent or "", bool(sitemaps),
                        host_delay_ms=delay_ms or 0, host_concurrency=concurrency or 0, priority=priority or 0,
                        extract_rules=rules or "", render=render or "never", screenshots=bool(screenshots))


def latest_passes(store: CrawlStore) -> dict[str, tuple[str, datetime, tuple[Any, ...]]]:
    """Per crawl family: its latest pass's id, submission time and ``OPTION_COLUMNS`` row."""
    if not store.exists():
        return {}
    with store.read() as con:
        rows = crawls.passes(con)
    return {base_id(row[0]): (row[0], row[1], tuple(row[2:])) for row in rows}


def plan_recrawls(store: CrawlStore, day: date) -> list[CrawlRequest]:
    """One pass per crawl family (base id), from its latest pass, unless it already ran on ``day``."""
    stamp = day.strftime("%Y%m%d")
    at = datetime(day.year, day.month, day.day)
    return [
        pass_request(f"{base}@{stamp}", options, at)
        for base, (last_id, _submitted, options) in sorted(latest_passes(store).items())
        if last_id != f"{base}@{stamp}"
    ]
