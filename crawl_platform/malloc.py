"""How a crawling process's C heap grows: few malloc arenas, and free memory handed back after a batch.

glibc's malloc gives each thread that allocates at the same time as another an arena of its own,
up to eight per core, and an arena keeps the pages it once held. A batch run's fetch threads
allocate every response body and header (CPython hands anything over 512 bytes to malloc), so each
of them ends up with an arena of tens of megabytes, most of it free but kept. Under the GIL the
threads allocate one at a time anyway, so :func:`limit_arenas` caps the arenas at
:data:`ARENAS` before the fetch threads start, and :func:`release_free_memory` returns the free
pages of every arena to the system once a batch is landed. Both do nothing where the C library is
not glibc. DuckDB and Arrow allocate through allocators of their own and are not affected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)

ARENAS = 2
"""Arenas a process's threads share (glibc's ``M_ARENA_MAX``, as ``MALLOC_ARENA_MAX`` sets it)."""

_M_ARENA_MAX = -8  # glibc's malloc.h


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt.argtypes, libc.malloc_trim.argtypes = [ctypes.c_int, ctypes.c_int], [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError, TypeError):  # not glibc: no mallopt or malloc_trim to call
        return None


@functools.cache
def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap this process's malloc arenas at ``arenas`` (once per process); True if the C library took it."""
    libc = _glibc()
    done = libc is not None and libc.mallopt(_M_ARENA_MAX, arenas) == 1
    if not done:
        log.debug("malloc arenas not capped: %s", "the C library is not glibc" if libc is None
                  else "glibc refused M_ARENA_MAX")
    return done


def release_free_memory() -> None:
    """Hand the free pages of every malloc arena back to the system (glibc's ``malloc_trim``)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
