"""The lake side of extraction: a crawl's stored rules, its records landed, and its typed view ``records_<crawl>``.

A crawl carries its extraction rules as JSON in ``crawls.extract_rules``; read back they are
checked again (:func:`stored_rules`). The records of a chunk of pages land in one transaction,
replacing what these pages had under the same rules, and the crawl's view, which casts each
field to the rules' type, is created again with them (:func:`land_extractions`).
:mod:`crawl_platform.extract.run` drives all this; the tables and their SQL are
:mod:`crawl_platform.store.records`'.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from crawl_platform.extract.engine import PageExtraction
from crawl_platform.extract.rules import ExtractionRules, RulesError, UnknownCrawlError, rules_from_json
from crawl_platform.store import crawls, records
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.records import view_name

__all__ = ["UnknownCrawlError", "crawls_with_rules", "land_extractions", "pending_pages", "set_rules",
           "stale_rows", "stored_rules", "view_name", "view_sql"]


def stored_rules(store: CrawlStore, crawl_id: str) -> ExtractionRules:
    """The rules the crawl carries; :class:`UnknownCrawlError` if it is unknown or has none."""
    with store.read() as con:
        known, text = crawls.extract_rules_of(con, crawl_id)
    if not known:
        raise UnknownCrawlError(f"no crawl {crawl_id!r}")
    if text is None:
        raise UnknownCrawlError(f"crawl {crawl_id!r} has no extraction rules (give them with "
                                f"`crawl-platform extract {crawl_id} --rules FILE`)")
    try:
        return rules_from_json(text)
    except RulesError as err:
        raise UnknownCrawlError(f"crawl {crawl_id!r}: {err}") from None


def crawls_with_rules(store: CrawlStore) -> dict[str, ExtractionRules]:
    """Every crawl that carries (usable) extraction rules, with them."""
    with store.read() as con:
        rows = crawls.crawls_with_rules(con)
    found: dict[str, ExtractionRules] = {}
    for crawl_id, text in rows:
        try:
            found[crawl_id] = rules_from_json(text)
        except RulesError:
            continue  # a producer outside the platform stored bad rules: extracting it says so
    return found


def set_rules(store: CrawlStore, crawl_id: str, rules: ExtractionRules) -> None:
    """Give a registered crawl new rules (its records are re-extracted at the next extraction)."""
    with store.write() as con:
        if not crawls.set_extract_rules(con, crawl_id, rules.to_json()):
            raise UnknownCrawlError(f"no crawl {crawl_id!r}")


def pending_pages(store: CrawlStore, crawl_id: str, digest: str) -> list[tuple[str, int]]:
    """The crawl's page versions still to extract with the rules ``digest``: each URL's latest
    archived version with a 2xx status that ``record_pages`` has not seen under these rules.
    Landing a page's latest version replaces the records of its earlier ones."""
    with store.read() as con:
        return records.pending_pages(con, crawl_id, digest)


def stale_rows(store: CrawlStore, crawl_id: str, digest: str) -> int:
    """How many of the crawl's records pages were made by other rules than ``digest``."""
    with store.read() as con:
        return records.stale_rows(con, crawl_id, digest)


def land_extractions(store: CrawlStore, crawl_id: str, rules: ExtractionRules,
                     pages: Sequence[PageExtraction], *, drop_stale: bool = False) -> int:
    """Land one chunk of pages' records in one transaction, replacing any rows these pages had
    under the same rules; with ``drop_stale``, also remove the crawl's rows made by other rules.
    Refreshes the crawl's typed view. Returns the snapshot committed."""
    now = datetime.now(UTC).replace(tzinfo=None)
    digest = rules.digest
    rows = [(p.url, p.version, r.index, json.dumps(r.values, ensure_ascii=False),
             json.dumps(r.errors, ensure_ascii=False)) for p in pages for r in p.records]
    record_table = pa.table({
        "url": pa.array([r[0] for r in rows], pa.string()),
        "version": pa.array([r[1] for r in rows], pa.int32()),
        "record_index": pa.array([r[2] for r in rows], pa.int32()),
        "fields": pa.array([r[3] for r in rows], pa.string()),
        "errors": pa.array([r[4] for r in rows], pa.string()),
    })
    page_table = pa.table({
        "url": pa.array([p.url for p in pages], pa.string()),
        "version": pa.array([p.version for p in pages], pa.int32()),
        "records": pa.array([len(p.records) for p in pages], pa.int32()),
        "error": pa.array([p.error for p in pages], pa.string()),
    })
    with store.write() as con:
        records.land_records(con, crawl_id, digest, page_table, record_table, now, drop_stale=drop_stale)
        refresh_view(con, crawl_id, rules)
    return store.last_snapshot_id or 0


def view_sql(crawl_id: str, rules: ExtractionRules) -> str:
    """``CREATE OR REPLACE VIEW records_<crawl>``: url, version, record_index, one column per
    field cast to its type (NULL where the field failed), and the errors object."""
    return records.view_sql(crawl_id, rules.digest, _field_types(rules))


def refresh_view(con: duckdb.DuckDBPyConnection, crawl_id: str, rules: ExtractionRules) -> None:
    records.refresh_view(con, crawl_id, rules.digest, _field_types(rules))


def _field_types(rules: ExtractionRules) -> dict[str, str]:
    return {name: rule.type for name, rule in rules.fields.items()}
