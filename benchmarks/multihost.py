"""One crawl on the multi-machine deployment with one worker host, then with two: pages/s and CPU per page.

Each run brings up `deploy/hosts.toml`'s control host and N worker hosts as network namespaces
(tests/cluster/, as the multi-machine test does; needs root), serves the same generated sites on
a host of their own, submits one crawl with `crawl-platform crawl --wait` on the control host and
times it from submission to done. Each host's processes are in a control group of their own, so
the CPU of each host is counted whole (run processes that already exited included). The
machine's busy CPU over the same time is printed beside it: the part that is not the cluster's
is the rest of the machine's load.

    .venv/bin/python benchmarks/multihost.py --sites 8 --pages 200 --host-delay-ms 50
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster.cluster import start_cluster


def host_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def measure(workers: int, args: argparse.Namespace) -> dict[str, object]:
    extra = {"CRAWL_HOST_DELAY_MS": str(args.host_delay_ms)}
    with start_cluster(workers=workers, extra_env=extra) as cluster:
        time.sleep(args.settle_s)  # the daemon's fork server and the workers finish starting
        cluster.start_sites(args.sites, args.pages, args.seed)
        hosts = ["control"] + [f"worker-{i + 1}" for i in range(workers)]
        cpu0 = {h: cluster.host(h).cpu_seconds() for h in hosts}
        busy0, load0 = host_busy_s(), os.getloadavg()[0]
        seeds = [f"http://{host}/" for host in cluster.seeds]
        start = time.monotonic()
        done = cluster.cli("control", "crawl", *seeds, "--crawl-id", f"bench-{workers}", "--wait",
                           "--timeout", "1500", timeout=1600)
        wall = time.monotonic() - start
        if done.returncode:
            raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
        cpu = {h: cluster.host(h).cpu_seconds() - cpu0[h] for h in hosts}
        busy = host_busy_s() - busy0
        pages = len(set(cluster.probe("control", "landed", f"bench-{workers}")["urls"]))  # type: ignore[arg-type]
        by_client: dict[str, int] = {}
        for r in cluster.site_requests():
            by_client[r.client] = by_client.get(r.client, 0) + 1
    workers_cpu = sum(v for h, v in cpu.items() if h != "control")
    return {"workers": workers, "pages": pages, "wall_s": round(wall, 1), "pages_per_s": round(pages / wall, 2),
            "cpu_ms_per_page": round(1000 * sum(cpu.values()) / pages, 1),
            "control_ms_per_page": round(1000 * cpu["control"] / pages, 1),
            "workers_ms_per_page": round(1000 * workers_cpu / pages, 1),
            "machine_busy_s": round(busy, 1), "cluster_cpu_s": round(sum(cpu.values()), 1),
            "load_before": round(load0, 2), "requests_by_worker": by_client}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=8)
    parser.add_argument("--pages", type=int, default=200, help="pages per site")
    parser.add_argument("--host-delay-ms", type=int, default=50)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--settle-s", type=float, default=10.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    results = []
    for workers in args.workers:
        result = measure(workers, args)
        print(json.dumps(result), flush=True)
        results.append(result)
    print("\n| Worker hosts | Pages | Wall | Pages/s | CPU ms/page (all hosts) | control | workers | "
          "Machine busy CPU s | Cluster CPU s | Load before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workers']} | {r['pages']} | {r['wall_s']} s | {r['pages_per_s']} | {r['cpu_ms_per_page']} | "
              f"{r['control_ms_per_page']} | {r['workers_ms_per_page']} | {r['machine_busy_s']} | "
              f"{r['cluster_cpu_s']} | {r['load_before']} |")


if __name__ == "__main__":
    main()
