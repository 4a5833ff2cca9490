"""An analyst's notebook on the lake while a crawl writes it, as its own process: a plain DuckDB
that attaches the lake with the two lines of docs/operations.md (read-only) and keeps it attached, reading in
long transactions, until told to stop. It writes what it saw as JSON for the test to check.

Usage: python -m tests.e2e.lake_reader CATALOG_PATH DATA_PATH STOP_FILE OUT_FILE
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import duckdb

HOLD_S = 1.0  # how long each reading transaction stays open (a notebook cell over one snapshot)
ATTACH_WAIT_S = 120.0  # the crawl creates the lake: wait for it to exist


def attach(catalog: Path, data_path: str, stop: Path) -> tuple[duckdb.DuckDBPyConnection, int]:
    """The two lines of docs/operations.md, retried until the crawl has created the lake; returns the
    connection and how many attempts it took."""
    deadline = time.monotonic() + ATTACH_WAIT_S
    attempts = 0
    while True:
        attempts += 1
        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        try:
            con.execute("LOAD ducklake; LOAD sqlite;")
            con.execute(f"ATTACH 'ducklake:sqlite:{catalog}' AS lake (DATA_PATH '{data_path}', READ_ONLY)")
            con.execute("SELECT count(*) FROM lake.pages").fetchone()
            return con, attempts
        except duckdb.Error:
            con.close()
            if time.monotonic() > deadline or stop.exists():
                raise
            time.sleep(0.5)


def main(catalog: Path, data_path: str, stop: Path, out: Path) -> None:
    con, attempts = attach(catalog, data_path, stop)
    reads: list[dict[str, object]] = []
    errors: list[str] = []
    while not stop.exists():
        started = time.monotonic()
        try:
            con.execute("BEGIN TRANSACTION")
            before = con.execute("SELECT count(*) FROM lake.pages").fetchone()[0]
            time.sleep(HOLD_S)  # the crawl keeps committing meanwhile
            after = con.execute("SELECT count(*) FROM lake.pages").fetchone()[0]
            urls = con.execute("SELECT count(DISTINCT url) FROM lake.pages").fetchone()[0]
            con.execute("COMMIT")
            reads.append({"before": before, "after": after, "distinct_urls": urls,
                          "seconds": round(time.monotonic() - started, 3)})
        except duckdb.Error as err:
            errors.append(" ".join(str(err).split()))
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
    con.close()
    out.write_text(json.dumps({"attach_attempts": attempts, "reads": reads, "errors": errors}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
