"""The ``crawls`` table: each registered crawl, its options, its state and its extraction rules.

A crawl id is registered once (:func:`insert_crawl`, in the transaction that admits its seeds);
its options never change after, its state moves along
:data:`~crawl_platform.states.CRAWL_TRANSITIONS` (:func:`set_state`) and its extraction rules may
be replaced (:func:`set_extract_rules`). Every function runs on the connection of the caller's
read or write (:meth:`CrawlStore.read`, :meth:`CrawlStore.write`). Neighbours: the frontier's
domain objects (:mod:`crawl_platform.frontier`) decide what is written here; :mod:`.frontier`
holds the URLs of each crawl.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import duckdb

from crawl_platform.states import CrawlState
from crawl_platform.store.frontier import sql_literal

# Every option of a crawl, in CrawlRequest's order after crawl_id and submitted_at: what a crawl id
# stands for (a request delivered again must carry the same), and what a recurring pass copies.
OPTION_COLUMNS = ("seeds, max_pages, max_depth, scope, allow_patterns, deny_patterns, "
                  "max_pages_per_host, user_agent, use_sitemaps, host_delay_ms, host_concurrency, priority, "
                  "extract_rules, render, screenshots")
OPTION_NAMES = tuple(name.strip() for name in OPTION_COLUMNS.split(","))


def crawl_ids(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Every registered crawl id."""
    return {row[0] for row in con.execute("SELECT crawl_id FROM crawls").fetchall()}


def known_crawls(con: duckdb.DuckDBPyConnection, crawl_ids: Collection[str]) -> set[str]:
    """The ids among ``crawl_ids`` of crawls that were registered."""
    rows = con.execute("SELECT crawl_id FROM crawls WHERE list_contains(?, crawl_id)", [sorted(crawl_ids)]).fetchall()
    return {r[0] for r in rows}


def is_registered(con: duckdb.DuckDBPyConnection, crawl_id: str) -> bool:
    row = con.execute("SELECT count(*) FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchone()
    return bool(row and row[0])


def family_registered(con: duckdb.DuckDBPyConnection, crawl_id: str, family: str) -> bool:
    """True when ``crawl_id`` or any pass of the crawl family ``family`` is registered."""
    known = con.execute("SELECT count(*) FROM crawls WHERE crawl_id = ? OR split_part(crawl_id, '@', 1) = ?",
                        [crawl_id, family]).fetchone()
    return bool(known and known[0])


def options_of(con: duckdb.DuckDBPyConnection, crawl_id: str) -> tuple[Any, ...] | None:
    """The crawl's ``OPTION_COLUMNS`` row (None when it is not registered)."""
    return con.execute(f"SELECT {OPTION_COLUMNS} FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchone()


def latest_family_options(con: duckdb.DuckDBPyConnection, family: str) -> tuple[Any, ...] | None:
    """The ``OPTION_COLUMNS`` row of the latest registered pass of the crawl family (None: none)."""
    return con.execute(f"SELECT {OPTION_COLUMNS} FROM crawls WHERE split_part(crawl_id, '@', 1) = ? "
                       "ORDER BY registered_at DESC LIMIT 1", [family]).fetchone()


def passes(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """Every crawl in registration order: ``(crawl_id, submitted_at, *OPTION_COLUMNS)``."""
    return con.execute(f"SELECT crawl_id, submitted_at, {OPTION_COLUMNS} FROM crawls ORDER BY registered_at").fetchall()


def insert_crawl(con: duckdb.DuckDBPyConnection, crawl_id: str, values: Sequence[object]) -> None:
    """In the caller's write transaction: register ``crawl_id`` with ``values`` (seeds, scope,
    max_pages, max_depth, submitted_at, registered_at, allow_patterns, deny_patterns,
    max_pages_per_host, user_agent, use_sitemaps, state, host_delay_ms, host_concurrency, priority,
    extract_rules, render, screenshots), unless it is registered already."""
    con.execute(
        # The lake has no unique keys: a crawl id is registered once because writers take
        # turns (the store's write lock) and this insert skips an id already there.
        """INSERT INTO crawls (crawl_id, seeds, scope, max_pages, max_depth, submitted_at,
                               registered_at, allow_patterns, deny_patterns, max_pages_per_host,
                               user_agent, use_sitemaps, state, host_delay_ms, host_concurrency,
                               priority, extract_rules, render, screenshots)
           SELECT ?, ?::VARCHAR[], ?, ?, ?, ?, ?, ?::VARCHAR[], ?::VARCHAR[], ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
           WHERE NOT EXISTS (SELECT 1 FROM crawls WHERE crawl_id = ?)""",
        [crawl_id, *values, crawl_id],
    )


def state_of(con: duckdb.DuckDBPyConnection, crawl_id: str) -> tuple[str | None, datetime | None] | None:
    """The crawl's stored state and when it last changed (NULLs in a lake older than the
    columns); None when the crawl is not registered."""
    row = con.execute("SELECT state, state_changed_at FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchone()
    return (row[0], row[1]) if row is not None else None


def set_state(con: duckdb.DuckDBPyConnection, crawl_id: str, state: CrawlState, at: datetime) -> None:
    """In the caller's write transaction: the crawl's state is ``state`` as of ``at``."""
    con.execute("UPDATE crawls SET state = ?, state_changed_at = ? WHERE crawl_id = ?", [state.value, at, crawl_id])


def states_of(con: duckdb.DuckDBPyConnection, crawl_ids: Collection[str]) -> list[tuple[str, str | None]]:
    """``(crawl_id, state)`` of each registered crawl among ``crawl_ids`` (state NULL: active)."""
    return con.execute("SELECT crawl_id, state FROM crawls WHERE list_contains(?, crawl_id)",
                       [sorted(crawl_ids)]).fetchall()


def paused_among(con: duckdb.DuckDBPyConnection, crawl_ids: Collection[str]) -> set[str]:
    """The crawls among ``crawl_ids`` that are paused."""
    paused_state = sql_literal(CrawlState.PAUSED)
    return {r[0] for r in con.execute(
        f"SELECT crawl_id FROM crawls WHERE list_contains(?, crawl_id) AND state = {paused_state}",
        [sorted(crawl_ids)]).fetchall()}


def fetch_terms(con: duckdb.DuckDBPyConnection, crawl_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """What a batch fetches each crawl's URLs by: ``(crawl_id, scope, seeds, allow_patterns,
    deny_patterns, user_agent, host_delay_ms, host_concurrency, render, screenshots, extract_rules)``
    of each of ``crawl_ids``."""
    return con.execute(
        """SELECT crawl_id, scope, seeds, allow_patterns, deny_patterns, user_agent, host_delay_ms,
                  host_concurrency, render, screenshots, extract_rules
           FROM crawls WHERE list_contains(?, crawl_id)""",
        [crawl_ids],
    ).fetchall()


def scopes_of_batch(con: duckdb.DuckDBPyConnection, batch_id: str) -> list[tuple[Any, ...]]:
    """``(crawl_id, scope, seeds, allow_patterns, deny_patterns)`` of each crawl with items in the batch."""
    return con.execute(
        """SELECT crawl_id, scope, seeds, allow_patterns, deny_patterns FROM crawls
           WHERE crawl_id IN (SELECT crawl_id FROM batch_items WHERE batch_id = $1)""",
        [batch_id]).fetchall()


def extract_rules_of(con: duckdb.DuckDBPyConnection, crawl_id: str) -> tuple[bool, str | None]:
    """Whether the crawl is registered, and its extraction rules as JSON (None without any)."""
    rows = con.execute("SELECT extract_rules FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchall()
    return (True, rows[0][0]) if rows else (False, None)


def crawls_with_rules(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """``(crawl_id, extract_rules)`` of every crawl that carries extraction rules."""
    return con.execute("SELECT crawl_id, extract_rules FROM crawls WHERE extract_rules IS NOT NULL").fetchall()


def set_extract_rules(con: duckdb.DuckDBPyConnection, crawl_id: str, rules_json: str) -> bool:
    """In the caller's write transaction: the crawl's extraction rules become ``rules_json``;
    False (nothing written) when the crawl is not registered."""
    if not con.execute("SELECT 1 FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchall():
        return False
    con.execute("UPDATE crawls SET extract_rules = ? WHERE crawl_id = ?", [rules_json, crawl_id])
    return True
