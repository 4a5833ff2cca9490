"""The lake-wide write lock: a lake's writers take turns on it, from any process on any machine.

An embedded (SQLite) catalog's lock is a ``flock`` on a file next to it; a PostgreSQL catalog's
is an advisory lock in its database, so writers on several machines take turns too. Both wait
with a growing pause up to a deadline, then raise :class:`StoreBusyError`. Readers never take it.
Neighbour: :class:`crawl_platform.store.database.CrawlStore` holds it around every write.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from crawl_platform.redaction import passwords, scrub
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError, one_line

ADVISORY_KEY = 0x63726177  # "craw": the lake-wide write lock in the PostgreSQL catalog database


def _wait_for(acquired: Callable[[], bool], deadline: float, timeout_s: float) -> None:
    """Call ``acquired`` until it returns True, pausing 5 ms, then longer up to 100 ms; raise
    :class:`StoreBusyError` past ``deadline`` (a ``time.monotonic()`` value)."""
    pause = 0.005
    while not acquired():
        if time.monotonic() > deadline:
            raise StoreBusyError(f"another writer held the lake for {timeout_s:.0f}s")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


@contextmanager
def file_lock(path: Path, deadline: float, timeout_s: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing) for the ``with`` block."""
    with open(path, "a+") as handle:

        def acquired() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        _wait_for(acquired, deadline, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def advisory_lock(dsn: str, deadline: float, timeout_s: float) -> Iterator[None]:
    """The PostgreSQL advisory lock :data:`ADVISORY_KEY` in the database ``dsn`` names, on a
    connection of its own, for the ``with`` block."""
    import psycopg2  # noqa: PLC0415 - only a PostgreSQL catalog needs it

    try:
        conn = psycopg2.connect(dsn, connect_timeout=10)
    except psycopg2.Error as err:
        # The driver's error may quote the connection string (an unparsable one, in part).
        raise StoreUnavailableError(scrub(one_line(f"cannot reach the lake catalog on PostgreSQL: {err}"),
                                          passwords(dsn))) from None
    try:
        conn.autocommit = True
        with conn.cursor() as cur:

            def acquired() -> bool:
                cur.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_KEY])
                row = cur.fetchone()
                return bool(row and row[0])

            _wait_for(acquired, deadline, timeout_s)
            try:
                yield
            finally:
                with contextlib.suppress(psycopg2.Error):
                    cur.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_KEY])
    finally:
        conn.close()
