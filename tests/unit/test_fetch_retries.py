"""Retries (crawl_platform.fetch.retry, used by crawl_platform.fetch.fetcher): connection failures, 429 and 5xx
are tried again with exponential backoff and jitter, Retry-After is honoured, the total wait is
bounded, and a final failure is a result with its error, never an exception."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from itertools import pairwise
from urllib.parse import quote

import pytest

from crawl_platform.fetch.retry import RetryPolicy, parse_retry_after
from tests.sites import dead_port
from tests.sites.hostile import HostileSite
from tests.unit.conftest import connection_refused, loopback_fetcher

pytestmark = pytest.mark.timing  # wall-clock waits between attempts: `make test` runs these alone

# Retry waits measured alone: no robots.txt request first, and no adaptive politeness gap on top.
ALONE = {"obey_robots": False, "max_host_delay_s": 0.0}


def _starts(site: HostileSite, path: str) -> list[float]:
    site.settle()
    return [s.started_at for s in site.seen(path)]


def test_retry_after_in_seconds_is_honoured(hostile):
    path = "/status/429?times=1&retry_after=1"
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(backoff_s=0.01)).fetch(hostile.url(path))
    assert result.status == 200
    assert b"Recovered" in result.body
    assert result.attempts == 2
    first, second = _starts(hostile, path)
    assert 1.0 <= second - first < 1.5


def test_retry_after_as_an_http_date_is_honoured(hostile):
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
    path = f"/status/503?times=1&retry_after={quote(when)}"
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(backoff_s=0.01)).fetch(hostile.url(path))
    assert result.status == 200
    first, second = _starts(hostile, path)
    assert second - first >= 0.9  # the date has whole seconds: between 1 and 2 s from now


def test_a_retry_after_beyond_the_budget_ends_the_attempts_at_once(hostile):
    path = "/status/429?retry_after=3600"
    started = time.monotonic()
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(max_total_wait_s=5.0)).fetch(hostile.url(path))
    assert time.monotonic() - started < 1.0
    assert result.status == 429
    assert result.error == "HTTP 429: gave up after 1 attempt: Retry-After 3600s exceeds the retry budget of 5.0s"
    assert len(_starts(hostile, path)) == 1


def test_a_flapping_503_is_retried_until_it_answers(hostile):
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(backoff_s=0.05)).fetch(hostile.url("/flap"))
    assert result.status == 200
    assert result.error is None
    assert result.attempts == 2


def test_backoff_grows_exponentially_with_jitter_and_attempts_are_bounded(hostile):
    path = "/status/503"
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(max_attempts=4, backoff_s=0.2)).fetch(hostile.url(path))
    assert result.status == 503
    assert result.error == "HTTP 503: gave up after 4 attempts"
    assert result.attempts == 4
    gaps = [b - a for a, b in pairwise(_starts(hostile, path))]
    assert len(gaps) == 3
    # Attempt n waits between half and all of 0.2 * 2**(n-1): 0.1-0.2, 0.2-0.4, 0.4-0.8.
    for n, gap in enumerate(gaps):
        ceiling = 0.2 * 2 ** n
        assert ceiling / 2 <= gap < ceiling + 0.1, gaps


def test_the_total_wait_is_bounded(hostile):
    fetcher = loopback_fetcher(**ALONE, retry=RetryPolicy(max_attempts=50, backoff_s=0.2, max_total_wait_s=1.0))
    started = time.monotonic()
    result = fetcher.fetch(hostile.url("/status/502"))
    took = time.monotonic() - started
    assert result.status == 502
    assert took < 1.5
    assert len(_starts(hostile, "/status/502")) == result.attempts <= 5
    assert re.fullmatch(rf"HTTP 502: gave up after {result.attempts} attempts: "
                        r"a \d+\.\ds backoff exceeds the retry budget of 0\.\ds", result.error or ""), result.error


def test_a_dropped_connection_is_retried(hostile):
    path = "/drop?times=2"
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(max_attempts=3, backoff_s=0.02)).fetch(hostile.url(path))
    assert result.status == 200
    assert b"Answered at last" in result.body
    assert result.attempts == 3
    assert len(_starts(hostile, path)) == 3


def test_4xx_other_than_429_is_final_at_once(hostile):
    result = loopback_fetcher(**ALONE, retry=RetryPolicy(backoff_s=0.01)).fetch(hostile.url("/status/404"))
    assert (result.status, result.error, result.attempts) == (404, None, 1)
    assert len(_starts(hostile, "/status/404")) == 1


def test_a_connection_that_never_succeeds_is_a_result_with_the_error():
    port = dead_port()
    fetcher = loopback_fetcher(**ALONE, retry=RetryPolicy(max_attempts=3, backoff_s=0.02))
    result = fetcher.fetch(f"http://127.0.0.1:{port}/page")
    assert result.status is None
    assert connection_refused(port, 3).fullmatch(result.error or ""), result.error
    assert result.attempts == 3


def test_waits_are_jittered_within_the_exponential_ceiling():
    policy = RetryPolicy(max_attempts=10, backoff_s=0.4, max_backoff_s=10.0)
    for attempt, ceiling in ((1, 0.4), (2, 0.8), (3, 1.6)):
        waits = [policy.wait_before(attempt, 0.0) for _ in range(200)]
        assert all(isinstance(w, float) and ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 100  # spread out, not the same instant for every worker


def test_parse_retry_after():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # in the past: now
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("-5", now) is None
