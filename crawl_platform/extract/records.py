"""The lake side of extraction: a crawl's stored rules, the ``records`` and ``record_pages`` tables,
and the typed view ``records_<crawl>`` with one real column per field.

``records`` keeps every crawl's records in one table: the source ``url`` and ``version``, the
``rules_digest`` of the rules that made them, the values as a JSON object (``fields``) and a note
per failed field (``errors``). ``record_pages`` has one row per page version the rules were
applied to, with its record count or the reason it gave none, so a page is never extracted twice
for the same rules and pages that failed are queryable. Both keep their keys as the rest of the
lake does: each landing deletes the rows it rewrites, in the same transaction, under the write lock.
Each landing also (re)creates the crawl's view, which casts ``fields`` to the rules' types.
:mod:`crawl_platform.extract.run` drives all this; the SQL of it lives here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from crawl_platform.extract.engine import PageExtraction
from crawl_platform.extract.rules import ExtractionRules, RulesError, UnknownCrawlError, rules_from_json
from crawl_platform.store.database import CrawlStore

__all__ = ["UnknownCrawlError", "crawls_with_rules", "land_extractions", "pending_pages", "set_rules",
           "stale_rows", "stored_rules", "view_name", "view_sql"]

_SQL_TYPES = {"string": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "date": "DATE",
              "list": "VARCHAR[]"}


def view_name(crawl_id: str) -> str:
    """The typed view of a crawl's records: ``records_`` and the id with every character that is
    not a letter, digit or ``_`` made ``_`` (``docs-1.2`` → ``records_docs_1_2``)."""
    return "records_" + re.sub(r"[^A-Za-z0-9_]", "_", crawl_id)


def stored_rules(store: CrawlStore, crawl_id: str) -> ExtractionRules:
    """The rules the crawl carries; :class:`UnknownCrawlError` if it is unknown or has none."""
    rows = store.query("SELECT extract_rules FROM crawls WHERE crawl_id = ?", [crawl_id])
    if not rows:
        raise UnknownCrawlError(f"no crawl {crawl_id!r}")
    if rows[0][0] is None:
        raise UnknownCrawlError(f"crawl {crawl_id!r} has no extraction rules (give them with "
                                f"`crawl-platform extract {crawl_id} --rules FILE`)")
    try:
        return rules_from_json(rows[0][0])
    except RulesError as err:
        raise UnknownCrawlError(f"crawl {crawl_id!r}: {err}") from None


def crawls_with_rules(store: CrawlStore) -> dict[str, ExtractionRules]:
    """Every crawl that carries (usable) extraction rules, with them."""
    rows = store.query("SELECT crawl_id, extract_rules FROM crawls WHERE extract_rules IS NOT NULL")
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
        if not con.execute("SELECT 1 FROM crawls WHERE crawl_id = ?", [crawl_id]).fetchall():
            raise UnknownCrawlError(f"no crawl {crawl_id!r}")
        con.execute("UPDATE crawls SET extract_rules = ? WHERE crawl_id = ?", [rules.to_json(), crawl_id])


_LATEST = """
    SELECT url, version, status FROM pages
    WHERE crawl_id = $crawl AND status IS NOT NULL AND warc_file IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY url ORDER BY version DESC) = 1"""


def pending_pages(store: CrawlStore, crawl_id: str, digest: str) -> list[tuple[str, int]]:
    """The crawl's page versions still to extract with the rules ``digest``: each URL's latest
    archived version with a 2xx status that ``record_pages`` has not seen under these rules.
    Landing a page's latest version replaces the records of its earlier ones."""
    with store.read() as con:
        rows = con.execute(
            f"""SELECT l.url, l.version FROM ({_LATEST}) l
            WHERE l.status BETWEEN 200 AND 299 AND NOT EXISTS (
                SELECT 1 FROM record_pages r WHERE r.crawl_id = $crawl AND r.rules_digest = $digest
                AND r.url = l.url AND r.version = l.version)
            ORDER BY l.url""",
            {"crawl": crawl_id, "digest": digest}).fetchall()
    return [(url, int(version)) for url, version in rows]


def stale_rows(store: CrawlStore, crawl_id: str, digest: str) -> int:
    """How many of the crawl's records pages were made by other rules than ``digest``."""
    rows = store.query("SELECT count(*) FROM record_pages WHERE crawl_id = ? AND rules_digest <> ?",
                       [crawl_id, digest])
    return int(rows[0][0])


def land_extractions(store: CrawlStore, crawl_id: str, rules: ExtractionRules,
                     pages: Sequence[PageExtraction], *, drop_stale: bool = False) -> int:
    """Land one chunk of pages' records in one transaction, replacing any rows these pages had
    under the same rules; with ``drop_stale``, also remove the crawl's rows made by other rules.
    Refreshes the crawl's typed view. Returns the snapshot committed."""
    now = datetime.now(UTC).replace(tzinfo=None)
    digest = rules.digest
    records = [(p.url, p.version, r.index, json.dumps(r.values, ensure_ascii=False),
                json.dumps(r.errors, ensure_ascii=False)) for p in pages for r in p.records]
    record_table = pa.table({
        "url": pa.array([r[0] for r in records], pa.string()),
        "version": pa.array([r[1] for r in records], pa.int32()),
        "record_index": pa.array([r[2] for r in records], pa.int32()),
        "fields": pa.array([r[3] for r in records], pa.string()),
        "errors": pa.array([r[4] for r in records], pa.string()),
    })
    page_table = pa.table({
        "url": pa.array([p.url for p in pages], pa.string()),
        "version": pa.array([p.version for p in pages], pa.int32()),
        "records": pa.array([len(p.records) for p in pages], pa.int32()),
        "error": pa.array([p.error for p in pages], pa.string()),
    })
    with store.write() as con:
        if drop_stale:
            for table in ("records", "record_pages"):
                con.execute(f"DELETE FROM {table} WHERE crawl_id = ? AND rules_digest <> ?", [crawl_id, digest])
        con.register("inc_record_pages", page_table)
        con.register("inc_records", record_table)
        for table in ("records", "record_pages"):
            con.execute(f"""DELETE FROM {table} WHERE crawl_id = $crawl AND rules_digest = $digest
                            AND url IN (SELECT url FROM inc_record_pages)""",
                        {"crawl": crawl_id, "digest": digest})
        con.execute("""INSERT INTO record_pages (crawl_id, rules_digest, url, version, records, error, extracted_at)
                       SELECT $crawl, $digest, url, version, records, error, $now FROM inc_record_pages""",
                    {"crawl": crawl_id, "digest": digest, "now": now})
        con.execute("""INSERT INTO records (crawl_id, rules_digest, url, version, record_index, fields, errors,
                                            extracted_at)
                       SELECT $crawl, $digest, url, version, record_index, fields::JSON, errors::JSON, $now
                       FROM inc_records""",
                    {"crawl": crawl_id, "digest": digest, "now": now})
        con.unregister("inc_records")
        con.unregister("inc_record_pages")
        refresh_view(con, crawl_id, rules)
    return store.last_snapshot_id or 0


def view_sql(crawl_id: str, rules: ExtractionRules) -> str:
    """``CREATE OR REPLACE VIEW records_<crawl>``: url, version, record_index, one column per
    field cast to its type (NULL where the field failed), and the errors object."""
    columns = []
    for name, rule in rules.fields.items():
        if rule.type == "list":
            expr = f"CAST(json_extract(fields, '$.{name}') AS VARCHAR[])"
        else:
            expr = f"CAST(json_extract_string(fields, '$.{name}') AS {_SQL_TYPES[rule.type]})"
        columns.append(f'{expr} AS "{name}"')
    literal = crawl_id.replace("'", "''")
    return (f'CREATE OR REPLACE VIEW "{view_name(crawl_id)}" AS SELECT url, version, record_index, '
            f"{', '.join(columns)}, errors FROM records "
            f"WHERE crawl_id = '{literal}' AND rules_digest = '{rules.digest}'")


def refresh_view(con: duckdb.DuckDBPyConnection, crawl_id: str, rules: ExtractionRules) -> None:
    con.execute(view_sql(crawl_id, rules))
