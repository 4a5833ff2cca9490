"""Fixtures shared by the fetch-layer tests: the hostile site, and a fetcher allowed on loopback."""

from collections.abc import Iterator
from typing import Any

import pytest

from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.frontier.frontier import Frontier
from tests.hostile_site import HostileSite


@pytest.fixture
def hostile() -> Iterator[HostileSite]:
    with HostileSite() as site:
        yield site


def loopback_fetcher(agent: str, **overrides: Any) -> Fetcher:
    """A fetcher for tests: 127.0.0.1 allowed, no politeness delay, short timeouts."""
    options = {"allowed_networks": ["127.0.0.1/32"], "host_delay_s": 0.0, "connect_timeout_s": 2.0,
               "read_timeout_s": 5.0} | overrides
    return Fetcher(agent, **options)


@pytest.fixture
def frontier(store: Any, bus: Any) -> Frontier:
    """The frontier over the test's store and broker."""
    return Frontier(store, bus)
