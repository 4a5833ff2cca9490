"""Users' regular expressions in a linear-time engine: RE2, through the ``google-re2`` wheel.

A crawl's ``--allow``/``--deny`` patterns and its extraction rules' ``url_pattern`` and ``regex``
come from whoever submits the crawl, and they are matched against every discovered URL and
extracted value, some of it under the lake's write lock. Python's ``re`` backtracks, so a
pattern such as ``(a+)+b`` takes exponential time on a long URL; RE2 matches in time linear in
the text, and refuses what needs backtracking (look-around, back-references). :func:`compile_pattern`
is the one way a user's pattern becomes a matcher: the CLI, the Launchpad and the message
models check patterns with it when a crawl is submitted, so what passes there compiles
everywhere later. Patterns are capped in length and in the memory RE2 may use for them.
"""

from __future__ import annotations

import functools
from typing import Protocol

import re2

MAX_PATTERN_LENGTH = 1_000
"""Longest pattern accepted, in characters."""
MAX_PATTERNS = 100
"""Most allow (or deny) patterns one crawl may have."""
_MAX_MEM = 8 << 20  # what RE2 may use to compile and run one pattern


class PatternError(ValueError):
    """A pattern RE2 cannot compile, or over the limits; ``str(err)`` is one line naming it."""


class Match(Protocol):
    """A match: what the callers use of RE2's (``re``-like) match object."""

    def group(self, index: int = 0, /) -> str | None: ...


class Pattern(Protocol):
    """A compiled pattern: what the callers use of RE2's (``re``-like) pattern object."""

    @property
    def pattern(self) -> str: ...

    @property
    def groups(self) -> int: ...

    def search(self, text: str) -> Match | None: ...

    def findall(self, text: str) -> list[object]: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would write every refused pattern to stderr
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2 (cached); raises :class:`PatternError` with a one-line reason."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"pattern {pattern[:40]!r}... is longer than {MAX_PATTERN_LENGTH} characters")
    try:
        compiled: Pattern = re2.compile(pattern, _options())
    except re2.error as err:
        reason = err.args[0].decode("utf-8", "replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise PatternError(f"pattern {pattern!r} is not a valid RE2 regular expression: "
                           f"{' '.join(reason.split())}") from None
    return compiled


def check_patterns(patterns: tuple[str, ...] | list[str], what: str = "patterns") -> None:
    """Raise :class:`PatternError` for the first pattern that does not compile, or for too many."""
    if len(patterns) > MAX_PATTERNS:
        raise PatternError(f"{what}: at most {MAX_PATTERNS}, got {len(patterns)}")
    for pattern in patterns:
        compile_pattern(pattern)
