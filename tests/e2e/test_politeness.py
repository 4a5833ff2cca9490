"""Politeness holds across the whole distributed crawl: two hosts, several batch runs in flight,
and each server's own log shows one request at a time and no gap below the host delay."""

from itertools import pairwise

import pytest

from crawl_platform.cli.demo_site import DemoSite
from tests.e2e.conftest import cli

# timing: the servers' clocks measure the gaps with 5 ms of slack, which a CPU shared with another
# e2e test (every Dagster run starts a Python process) does not leave; `make test` runs it alone.
pytestmark = [pytest.mark.e2e(seconds=170), pytest.mark.timing]
DELAY_MS = 150


def _overlaps_and_gaps(records):
    spans = sorted((r.started_at, r.finished_at) for r in records)
    overlaps = sum(1 for (_s1, e1), (s2, _e2) in pairwise(spans) if s2 < e1)
    gaps = [s2 - s1 for (s1, _e1), (s2, _e2) in pairwise(spans)]
    return overlaps, gaps


def test_two_hosts_many_runs_never_more_than_one_request_per_host_or_a_gap_below_the_delay(start_platform):
    # Small batches: many runs queue up and run concurrently (up to 4 at a time).
    _settings, env = start_platform(host_delay_ms=DELAY_MS, batch_size=10, max_concurrent_runs=4)
    with DemoSite(n_pages=25, seed=3).serve() as one, DemoSite(n_pages=25, seed=4).serve() as two:
        done = cli(env, "crawl", one.base_url + "/", two.base_url + "/", "--crawl-id", "polite",
                   "--wait", "--timeout", "300")
        assert done.returncode == 0, done.stdout + done.stderr
        for server in (one, two):
            assert len(server.requests) >= len(server.site.expected_urls(server.base_url))
            overlaps, gaps = _overlaps_and_gaps(server.requests)
            assert overlaps == 0
            # 5 ms of slack for the server's own timestamping after accept.
            assert min(gaps) >= DELAY_MS / 1000 - 0.005, sorted(gaps)[:5]
