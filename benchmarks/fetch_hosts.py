"""Fetcher politeness benchmark: one batch of many hosts fetched and parsed, as a fetch step does it.

The hosts are `DemoSite` servers on loopback ports, run in a child process so their CPU is not
this one's. One `Fetcher` (the batch run's) fetches every URL of every host once, with the
given per-host delay and worker count, then parses every HTML page
(`Fetcher.fetch_all`, as `BatchCrawler.fetch_shard` does). Prints wall seconds, pages/s, CPU,
and the politeness floor: the busiest host's URLs times the delay, the least time any polite
fetcher can take. With more hosts than workers, a fetcher whose workers sit out their hosts'
gaps takes about hosts / workers times that floor.

    .venv/bin/python benchmarks/fetch_hosts.py --hosts 100 --pages-per-host 40 --host-delay-ms 250

It also prints the process's peak RSS. ``--glibc-arenas`` leaves glibc's malloc arenas as they
come (up to eight per core) instead of the two the fetcher caps them at
(:mod:`crawl_platform.malloc`), to compare the two.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crawl_platform.fetch import fetcher as fetcher_module
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.parse.html import parse_html

SERVE = """
import json, sys, time
sys.path.insert(0, {repo!r})
from crawl_platform.cli.demo_site import DemoSite
sites = [DemoSite(n_pages={pages}, seed=1 + i) for i in range({hosts})]
servers = [site.serve().__enter__() for site in sites]
print(json.dumps([sorted(s.expected_urls(v.base_url)) for s, v in zip(sites, servers)]), flush=True)
time.sleep(3600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages-per-host", type=int, default=40)
    parser.add_argument("--host-delay-ms", type=int, default=250)
    parser.add_argument("--workers", type=int, default=16, help="CRAWL_FETCH_CONCURRENCY")
    parser.add_argument("--glibc-arenas", action="store_true", help="do not cap the malloc arenas")
    args = parser.parse_args()
    if args.glibc_arenas:
        fetcher_module.limit_arenas = lambda arenas=0: False  # the fetcher's own call, made a no-op

    code = SERVE.format(repo=str(REPO), pages=args.pages_per_host, hosts=args.hosts)
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        urls = [url for host_urls in json.loads(server.stdout.readline()) for url in host_urls]  # type: ignore[union-attr]
        fetcher = Fetcher("crawl-platform-bench/1.0", allowed_networks=["127.0.0.0/8"],
                          host_delay_s=args.host_delay_ms / 1000, concurrency=args.workers, obey_robots=False)
        started, cpu_before = time.monotonic(), os.times()
        results = fetcher.fetch_all(urls)
        pages = [parse_html(r.body, r.final_url, r.content_type) for r in results.values() if r.is_html]
        fetched, parsed = sum(r.status == 200 for r in results.values()), len(pages)
        wall = time.monotonic() - started
        cpu_after = os.times()
        fetcher.close()
    finally:
        server.kill()
    busiest = max(Counter(origin_of(u) for u in urls).values())
    floor = busiest * args.host_delay_ms / 1000
    cpu = cpu_after.user - cpu_before.user + cpu_after.system - cpu_before.system
    print(f"hosts={args.hosts} urls={len(urls)} fetched_200={fetched} parsed={parsed} workers={args.workers} "
          f"host_delay_ms={args.host_delay_ms}")
    print(f"wall_s={wall:.2f} pages_per_s={len(urls) / wall:.1f} cpu_s={cpu:.2f} "
          f"politeness_floor_s={floor:.2f} wall_over_floor={wall / floor if floor else float('nan'):.2f} "
          f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


if __name__ == "__main__":
    main()
