"""The ``records`` and ``record_pages`` tables, and each crawl's typed view ``records_<crawl>``.

``records`` keeps every crawl's records in one table: the source ``url`` and ``version``, the
``rules_digest`` of the rules that made them, the values as a JSON object (``fields``) and a note
per failed field (``errors``). ``record_pages`` has one row per page version the rules were
applied to, with its record count or the reason it gave none, so a page is never extracted twice
for the same rules and pages that failed are queryable. Both keep their keys as the rest of the
lake does: each landing deletes the rows it rewrites, in the same transaction, under the write lock.
Each landing also (re)creates the crawl's view, which casts ``fields`` to the rules' types.
The rules themselves are :mod:`crawl_platform.extract`'s; every function here takes plain values
and runs on the connection of the caller's read or write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

_SQL_TYPES = {"string": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "date": "DATE",
              "list": "VARCHAR[]"}


def view_name(crawl_id: str) -> str:
    """The typed view of a crawl's records: ``records_`` and the id with every character that is
    not a letter, digit or ``_`` made ``_`` (``docs-1.2`` → ``records_docs_1_2``)."""
    return "records_" + re.sub(r"[^A-Za-z0-9_]", "_", crawl_id)


_LATEST = """
    SELECT url, version, status FROM pages
    WHERE crawl_id = $crawl AND status IS NOT NULL AND warc_file IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY url ORDER BY version DESC) = 1"""


def pending_pages(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str) -> list[tuple[str, int]]:
    """The crawl's page versions still to extract with the rules ``digest``: each URL's latest
    archived version with a 2xx status that ``record_pages`` has not seen under these rules."""
    rows = con.execute(
        f"""SELECT l.url, l.version FROM ({_LATEST}) l
        WHERE l.status BETWEEN 200 AND 299 AND NOT EXISTS (
            SELECT 1 FROM record_pages r WHERE r.crawl_id = $crawl AND r.rules_digest = $digest
            AND r.url = l.url AND r.version = l.version)
        ORDER BY l.url""",
        {"crawl": crawl_id, "digest": digest}).fetchall()
    return [(url, int(version)) for url, version in rows]


def stale_rows(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str) -> int:
    """How many of the crawl's records pages were made by other rules than ``digest``."""
    rows = con.execute("SELECT count(*) FROM record_pages WHERE crawl_id = ? AND rules_digest <> ?",
                       [crawl_id, digest]).fetchall()
    return int(rows[0][0])


def land_records(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str, page_table: pa.Table,
                 record_table: pa.Table, now: datetime, *, drop_stale: bool = False) -> None:
    """In the caller's write transaction: the pages of ``page_table`` (url, version, records,
    error) and their records (``record_table``: url, version, record_index, fields, errors as JSON
    text) replace any rows these pages had under the rules ``digest``; with ``drop_stale``, the
    crawl's rows made by other rules are removed too."""
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


def view_sql(crawl_id: str, digest: str, fields: Mapping[str, str]) -> str:
    """``CREATE OR REPLACE VIEW records_<crawl>``: url, version, record_index, one column per
    field (``fields``: name -> its type, ``string``, ``int``, ``float``, ``bool``, ``date`` or
    ``list``) cast to its type (NULL where the field failed), and the errors object."""
    columns = []
    for name, kind in fields.items():
        if kind == "list":
            expr = f"CAST(json_extract(fields, '$.{name}') AS VARCHAR[])"
        else:
            expr = f"CAST(json_extract_string(fields, '$.{name}') AS {_SQL_TYPES[kind]})"
        columns.append(f'{expr} AS "{name}"')
    literal = crawl_id.replace("'", "''")
    return (f'CREATE OR REPLACE VIEW "{view_name(crawl_id)}" AS SELECT url, version, record_index, '
            f"{', '.join(columns)}, errors FROM records "
            f"WHERE crawl_id = '{literal}' AND rules_digest = '{digest}'")


def refresh_view(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str, fields: Mapping[str, str]) -> None:
    """(Re)create the crawl's typed view for the rules ``digest`` (see :func:`view_sql`)."""
    con.execute(view_sql(crawl_id, digest, fields))


def field_frame(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str, values: Sequence[str],
                type_errors: Sequence[str]) -> pd.DataFrame:
    """The crawl's records made by the rules ``digest``: url, version, record_index, then each of
    ``values`` (a field's value as text, NULL where it failed), then ``<field>__type_error`` for
    each of ``type_errors`` (the field's note when its value had the wrong type, else NULL)."""
    selects = ["url", "version", "record_index"]
    selects += [f"json_extract_string(fields, '$.{name}') AS \"{name}\"" for name in values]
    for name in type_errors:
        note = f"json_extract_string(errors, '$.{name}')"
        selects.append(f"CASE WHEN starts_with({note}, 'type:') THEN {note} END AS \"{name}__type_error\"")
    return con.execute(f"SELECT {', '.join(selects)} FROM records WHERE crawl_id = ? AND rules_digest = ?",
                       [crawl_id, digest]).df()


def page_counts(con: duckdb.DuckDBPyConnection, crawl_id: str, digest: str) -> tuple[int, int]:
    """How many pages the rules ``digest`` were applied to in the crawl, and how many of them gave an error."""
    row = con.execute("SELECT count(*), count(error) FROM record_pages WHERE crawl_id = ? AND rules_digest = ?",
                      [crawl_id, digest]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)
