"""The store's two errors, each one line a user can act on (raised by :mod:`.database` and :mod:`.locks`)."""

from __future__ import annotations


class StoreBusyError(RuntimeError):
    """Another writer held the lake's write lock for longer than the timeout."""


class StoreUnavailableError(RuntimeError):
    """The lake cannot be opened (missing or corrupt catalog, unreachable PostgreSQL, unwritable
    data path); ``str(err)`` is one line saying which and what to do. Nothing landed is touched."""


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks folded into single spaces."""
    return " ".join(text.split())
