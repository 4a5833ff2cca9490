"""When to try a request again, and how long to wait first.

The fetcher retries connection failures, ``429 Too Many Requests`` and 5xx answers; everything
else is final. Waits grow exponentially with jitter (so many workers hitting one sick server do
not come back in lockstep), a ``Retry-After`` header (seconds or an HTTP date) is honoured as a
minimum, and the waits of one URL add up to at most ``max_total_wait_s``: a server asking for
more than that gets no further attempt, and the URL lands as a failure with the reason.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts, backoff and the wait budget for one URL.

    ``max_attempts`` counts the first try: 1 means never retry.
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0
    max_total_wait_s: float = 30.0

    def should_retry_status(self, status: int) -> bool:
        return status in RETRY_STATUSES

    def wait_before(self, attempt: int, waited_s: float, retry_after_s: float | None = None) -> float | str:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` >= 1 tries done so far), or,
        when there is to be no further attempt, the reason as a string.

        The caller sleeps the returned seconds (on top of the host's politeness gap) and adds
        them to ``waited_s``.
        """
        tries = f"{attempt} attempt{'s' if attempt != 1 else ''}"
        if attempt >= self.max_attempts:
            return f"gave up after {tries}"
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        wait: float = ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 -- jitter, not a secret
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        budget = self.max_total_wait_s - waited_s
        if wait > budget:
            asked = f"Retry-After {retry_after_s:g}s" if retry_after_s is not None and retry_after_s > budget \
                else f"a {wait:.1f}s backoff"
            return f"gave up after {tries}: {asked} exceeds the retry budget of {budget:.1f}s"
        return wait
