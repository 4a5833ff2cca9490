"""The store's two errors, each one line a user can act on (raised by :mod:`.database` and :mod:`.locks`),
and :func:`scrubbed_errors`, which keeps a catalog's password out of any error's message."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawl_platform.store.location import LakeLocation


class StoreBusyError(RuntimeError):
    """Another writer held the lake's write lock for longer than the timeout."""


class StoreUnavailableError(RuntimeError):
    """The lake cannot be opened (missing or corrupt catalog, unreachable PostgreSQL, unwritable
    data path); ``str(err)`` is one line saying which and what to do. Nothing landed is touched."""


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks folded into single spaces."""
    return " ".join(text.split())


@contextmanager
def scrubbed_errors(*locations: LakeLocation) -> Iterator[None]:
    """Raise an error of the block again with the passwords of the lakes' catalogs taken out of
    its message (same type, nothing chained: Dagster shows a chained error too). DuckDB repeats a
    PostgreSQL catalog's whole connection string in the error of any statement that finds the
    catalog out of reach, and the store's own errors quote DuckDB's."""
    try:
        yield
    except Exception as err:
        message = clean = str(err)
        for location in locations:
            clean = location.scrub(clean)
        if clean == message:
            raise
        try:
            scrubbed = type(err)(clean)
        except Exception:  # a type built from other arguments: the message matters more than the type
            scrubbed = RuntimeError(clean)
        raise scrubbed from None
