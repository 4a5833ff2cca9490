"""The command line's one-line error contract: the exit codes and :func:`fail`, which every command uses.

A user's mistake prints one line to stderr and exits :data:`EXIT_USAGE`; an unreachable broker or
a busy or unavailable lake prints one line and exits :data:`EXIT_UNAVAILABLE`; never a traceback.
:mod:`crawl_platform.cli.main` turns the engine's exceptions into these, and each command module
(:mod:`~crawl_platform.cli.crawls`, :mod:`~crawl_platform.cli.archive`) fails its own refusals
through :func:`fail`, so the line looks the same whichever prints it.
"""

from __future__ import annotations

import sys

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 1


def fail(message: str, code: int) -> int:
    """One plain line on stderr (never markup, never wrapped), then the exit code."""
    print(f"crawl-platform: {' '.join(message.split())}", file=sys.stderr, flush=True)
    return code
