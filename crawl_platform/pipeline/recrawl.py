"""Recurring crawls: which crawls to submit again, under which new ids.

A crawl id is one pass over a site; a recrawl is a new crawl with the same seeds and limits and
the id ``<base>@<date>``, so its versions land next to the first pass's and unchanged pages get
no new version. The Dagster schedule in ``sensors/schedules.py`` turns the plan into runs of the
Launchpad job; nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from crawl_platform.store.database import CrawlStore


@dataclass(frozen=True)
class RecrawlPlan:
    crawl_id: str
    seeds: tuple[str, ...]
    max_pages: int
    max_depth: int
    scope: str


def base_id(crawl_id: str) -> str:
    """The crawl id without its recrawl date suffix."""
    return crawl_id.split("@", 1)[0]


def plan_recrawls(store: CrawlStore, day: date) -> list[RecrawlPlan]:
    """One plan per crawl family (base id), from its latest pass, unless it already ran on ``day``."""
    if not store.exists():
        return []
    rows = store.query("SELECT crawl_id, seeds, max_pages, max_depth, scope FROM crawls ORDER BY registered_at")
    latest: dict[str, tuple[str, list[str], int, int, str]] = {}
    for crawl_id, seeds, max_pages, max_depth, scope in rows:
        latest[base_id(crawl_id)] = (crawl_id, seeds, max_pages, max_depth, scope)
    stamp = day.strftime("%Y%m%d")
    return [
        RecrawlPlan(f"{base}@{stamp}", tuple(seeds), max_pages, max_depth, scope)
        for base, (last_id, seeds, max_pages, max_depth, scope) in sorted(latest.items())
        if last_id != f"{base}@{stamp}"
    ]
