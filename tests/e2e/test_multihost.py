"""The scale-out deployment on several machines: `deploy/hosts.toml`'s control host and two worker
hosts, each a Linux network namespace with its own address and its own folder, and the crawled
sites on a host of their own (tests/cluster/). The machine's own services are out of the hosts'
reach: the control host runs its own PostgreSQL, RabbitMQ and Kafka, as the guide says.

Each test crawls generated sites served by the site host and reads the result the way a user
would: the pages each host reads from the lake, the stored responses each host reads back from
the archive, and the site server's own access log (which machine asked, and when)."""

import os
import shutil
import time
from collections import defaultdict
from itertools import pairwise

import pytest

from tests.cluster.cluster import Cluster, start_cluster

pytestmark = [
    pytest.mark.e2e(seconds=900),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="builds hosts as network namespaces: needs root and iproute2's ip"),
]

DELAY_S = 0.25  # CRAWL_HOST_DELAY_MS's default: the gap a site sees between two requests
SLACK_S = 0.05  # the site host stamps a request when its handler starts, after the connection's accept


@pytest.fixture(scope="module")
def cluster():
    with start_cluster(workers=2) as running:
        running.assert_private()
        yield running


def crawl(cluster: Cluster, crawl_id: str, timeout_s: int = 500):
    seeds = [f"http://{host}/" for host in cluster.seeds]
    return cluster.cli("control", "crawl", *seeds, "--crawl-id", crawl_id, "--wait", "--timeout", str(timeout_s),
                       timeout=timeout_s + 60)


def assert_landed_exactly_once(cluster: Cluster, crawl_id: str, host: str = "control") -> list[str]:
    landed = cluster.probe(host, "landed", crawl_id)
    urls = landed["urls"]
    assert len(urls) == len(set(urls)), "a page landed twice"
    expected = cluster.expected_urls
    assert set(urls) == expected, (f"missing {sorted(expected - set(urls))[:5]}, "
                                   f"unexpected {sorted(set(urls) - expected)[:5]}")
    assert landed["pending"] == 0
    return urls


def start_crawl(cluster: Cluster, crawl_id: str):
    """``crawl --wait`` started on the control host; its output goes to the host's log ``crawl-<id>``."""
    control = cluster.host("control")
    seeds = [f"http://{host}/" for host in cluster.seeds]
    return control.start(f"crawl-{crawl_id}", " ".join(["crawl-platform", "crawl", *seeds, "--crawl-id", crawl_id,
                                                        "--wait", "--timeout", "500"]), cluster.env(control))


def wait_for_requests(cluster: Cluster, count: int, waiter, log: str, client: str | None = None) -> None:
    """Until the site host has answered ``count`` requests (from ``client``, if given), mid-crawl."""
    deadline = time.monotonic() + 240
    while sum(client in (None, r.client) for r in cluster.site_requests()) < count:
        assert waiter.poll() is None, cluster.host("control").log(log)[-3000:]
        assert time.monotonic() < deadline, f"fewer than {count} requests after 240 s"
        time.sleep(0.5)


def test_every_page_once_every_record_readable_from_every_host_politeness_across_workers(cluster):
    cluster.start_sites(sites=4, pages=60, seed=1)
    done = crawl(cluster, "everywhere")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + cluster.logs_tail()
    urls = assert_landed_exactly_once(cluster, "everywhere")
    for host in ("control", "worker-1", "worker-2"):
        records = cluster.probe(host, "archive", "everywhere")["records"]
        assert sorted(url for url, *_ in records) == sorted(urls), host
        empty = [url for url, status, kind, size in records if status == 200 and "html" in kind and not size]
        assert not empty, host

    # The lake's files, the archive and the handoff went through the control host's S3 server;
    # the workers' folders hold none of them.
    bucket = cluster.host("control").home / "s3" / "crawl-lake"
    assert list((bucket / "lake").rglob("*.parquet"))
    assert list((bucket / "archive").rglob("*.warc.gz"))
    for name in ("worker-1", "worker-2"):
        kept = {p.suffix for p in cluster.host(name).home.rglob("*") if p.is_file()}
        assert not kept & {".parquet", ".gz", ".pickle"}, (name, kept)

    requests = cluster.site_requests()
    workers = {cluster.host(name).address for name in ("worker-1", "worker-2")}
    assert {r.client for r in requests} == workers  # both worker hosts fetched, nothing else did
    by_site = defaultdict(list)
    for r in requests:
        by_site[r.port].append(r)
    for port, seen in by_site.items():
        seen.sort()
        overlaps = [(a, b) for a, b in pairwise(seen) if b.at < a.answered]
        assert not overlaps, f"site {port}: two requests at once: {overlaps[:2]}"
        gaps = [b.at - a.at for a, b in pairwise(seen)]
        assert min(gaps) >= DELAY_S - SLACK_S, f"site {port}: gaps {sorted(gaps)[:5]}"


def test_a_worker_host_killed_mid_crawl_loses_nothing_and_duplicates_nothing(cluster):
    cluster.start_sites(sites=4, pages=150, seed=11)
    control = cluster.host("control")
    waiter = start_crawl(cluster, "killed")
    victim = cluster.host("worker-1")
    wait_for_requests(cluster, 40, waiter, "crawl-killed", client=victim.address)
    victim.kill()  # every process of the host, at once: the machine is gone
    killed_at = time.time()
    try:
        waiter.wait(560)
        assert waiter.returncode == 0, control.log("crawl-killed")[-3000:] + cluster.logs_tail()
        assert_landed_exactly_once(cluster, "killed", host="worker-2")
        after = [r for r in cluster.site_requests() if r.at > killed_at]
        assert after  # the crawl went on after the kill
        assert {r.client for r in after} == {cluster.host("worker-2").address}
    finally:
        cluster.bring_up(cluster.deployment.host("worker-1"))  # back for the tests after this one


OUTAGE_S = 30


def test_the_catalog_then_the_object_store_unreachable_for_a_while_the_crawl_waits_and_resumes_nothing_lost(cluster):
    """The catalog's PostgreSQL (Dagster's storage with it) stops answering mid-crawl for OUTAGE_S,
    then, once the crawl has gone on, the S3 server does: every process that asks the server waits
    on its connection, as behind a partition, and the crawl then finishes with every page landed
    once. One crawl takes both outages, so the module's cluster crawls once for them."""
    cluster.start_sites(sites=4, pages=150, seed=21)
    control = cluster.host("control")
    waiter = start_crawl(cluster, "outages")
    requests = 60
    for program in ("postgres", "rclone"):
        wait_for_requests(cluster, requests, waiter, "crawl-outages")
        with control.paused(program) as pids:
            assert pids, program
            time.sleep(OUTAGE_S)
            assert waiter.poll() is None, program  # waiting, not failed
        requests = len(cluster.site_requests()) + 40  # the next outage once the crawl has gone on
    waiter.wait(560)
    assert waiter.returncode == 0, control.log("crawl-outages")[-3000:] + cluster.logs_tail()
    assert_landed_exactly_once(cluster, "outages")
