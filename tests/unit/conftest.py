"""Fixtures and helpers shared by the fetch-layer tests: the hostile site, the User-Agent the tests
crawl as, a fetcher allowed on loopback, the error a closed port lands with, and the frontier over a
test's store and broker."""

import errno
import re
from collections.abc import Iterator
from typing import Any

import pytest

from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.politeness import HostPacer
from crawl_platform.frontier.frontier import Frontier
from tests.conftest import lake_catalog
from tests.sites.hostile import HostileSite

AGENT = "crawl-platform-test/1.0"
# What a URL lands with when its host's robots.txt answered 5xx or not at all (RFC 9309: stay away).
UNREACHABLE = "robots.txt unreachable (server error or network failure): host skipped until it answers"


@pytest.fixture
def hostile() -> Iterator[HostileSite]:
    with HostileSite() as site:
        yield site


def loopback_fetcher(agent: str = AGENT, *, pacer: HostPacer | None = None, **overrides: Any) -> Fetcher:
    """A fetcher for tests: 127.0.0.1 allowed, no politeness delay, short timeouts.

    ``overrides`` are `Fetcher` arguments; ``pacer`` replaces the `HostPacer` they build, for gaps
    those arguments cannot set (a throttle step, a decay).
    """
    options = {"allowed_networks": ["127.0.0.1/32"], "host_delay_s": 0.0, "connect_timeout_s": 2.0,
               "read_timeout_s": 5.0} | overrides
    fetcher = Fetcher(agent, **options)
    if pacer is not None:
        fetcher.pacer = pacer
    return fetcher


def connection_refused(port: int, attempts: int) -> re.Pattern[str]:
    """The error a URL on 127.0.0.1:``port``, where nothing listens, lands with after ``attempts``
    tries: urllib3's refusal naming that port, then the fetcher's count of attempts."""
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    return re.compile(
        rf"ConnectionError: GuardedHTTPPool\(host='127\.0\.0\.1', port={port}\): Max retries exceeded .*"
        rf"Failed to establish a new connection: \[Errno {errno.ECONNREFUSED}\] Connection refused.*"
        rf" \(gave up after {tries}\)")


@pytest.fixture
def frontier(store: Any, bus: Any) -> Frontier:
    """The frontier over the test's store and broker."""
    return Frontier(store, bus)


@pytest.fixture(params=["sqlite", "postgres"])
def lake_settings(request: pytest.FixtureRequest, store_settings: Any, tmp_path: Any) -> Any:
    """``store_settings`` on a new lake, once with the embedded SQLite catalog and once with its
    catalog in a fresh PostgreSQL database (Parquet files under the test's folder)."""
    if request.param == "sqlite":
        return store_settings
    return store_settings.model_copy(update={"lake_catalog": lake_catalog(request.getfixturevalue("postgres_url")),
                                             "lake_data_path": str(tmp_path / "pg-lake-data")})
