"""One engine crawl of a generated site with the lake's Parquet files and the raw archive on local
disk, then on an S3 server (``rclone serve s3`` on loopback, the tests' server): pages/s and CPU
milliseconds per page of the crawl (this process and its parse workers), and the S3 server's own
CPU per page. The catalog stays an embedded SQLite file in both. Loopback only; stops by itself.

    .venv/bin/python benchmarks/object_storage.py --pages 1000 --rounds 2
"""

import argparse
import collections
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.crawl_benchmark import run_engine
from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore
from tests.sites.object_store import S3Server

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


S3_REQUEST = re.compile(r"serve s3: ([A-Z][A-Z ]*[A-Z])\b")


def s3_requests(log: Path) -> collections.Counter[str]:
    """The S3 requests the server answered, by kind, from its DEBUG log."""
    with log.open(encoding="utf-8", errors="replace") as lines:
        return collections.Counter(m.group(1) for line in lines if (m := S3_REQUEST.search(line)))


def crawl_once(where: str, pages: int, broker: EmbeddedBroker, workdir: Path,
               count_requests: bool = False) -> dict[str, Any]:
    site = DemoSite(n_pages=pages, seed=7)
    tag = uuid.uuid4().hex[:6]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(site.serve())
        settings = Settings(
            kafka_bootstrap_servers=broker.bootstrap_servers, **EMBEDDED_BUS_SETTINGS,
            seeds_topic=f"seeds-{tag}", frontier_topic=f"frontier-{tag}", dead_letter_topic=f"dead-{tag}",
            pages_topic=f"pages-{tag}", control_topic=f"control-{tag}",
            lake_path=workdir / tag / "lake", dagster_home=workdir / tag / "dagster_home",
            handoff_dir=workdir / tag / "handoff", host_delay_ms=0, allowed_networks=["127.0.0.0/8"])
        s3 = None
        if where == "s3":
            s3 = stack.enter_context(S3Server(workdir / tag / "s3", log_level="DEBUG" if count_requests else "NOTICE"))
            bucket = s3.new_bucket()
            settings = s3.settings(settings).model_copy(update={"lake_data_path": f"s3://{bucket}/lake/"})
        expected = site.expected_urls(server.base_url)
        cpu_before = os.times()
        server_before = process_cpu_s(s3.pid) if s3 else 0.0
        started = time.monotonic()
        run_engine(settings, [server.base_url + "/"])
        wall = time.monotonic() - started
        cpu_after = os.times()
        server_cpu = (process_cpu_s(s3.pid) if s3 else 0.0) - server_before
        store = CrawlStore.from_settings(settings)
        landed = store.query("SELECT count(DISTINCT url), count(*), count(warc_file) FROM pages")[0]
        landings = store.query("SELECT count(DISTINCT batch_id) FROM batch_items")[0][0]
        assert landed[0] == landed[1] == len(expected), (landed, len(expected))
        assert landed[2] >= landed[0] * 0.9, landed  # the archive holds (nearly) every page
        archive = store.archive.url
        store.close()
        requests = s3_requests(s3.log_path) if s3 and count_requests else collections.Counter()
    cpu = (cpu_after.user - cpu_before.user + cpu_after.system - cpu_before.system
           + cpu_after.children_user - cpu_before.children_user
           + cpu_after.children_system - cpu_before.children_system)
    return {"pages": landed[0], "wall_s": wall, "pages_per_s": landed[0] / wall,
            "cpu_ms_per_page": cpu * 1000 / landed[0], "server_cpu_ms_per_page": server_cpu * 1000 / landed[0],
            "archive": archive, "landings": landings, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="crawls per place, alternating local and s3")
    parser.add_argument("--count-requests", action="store_true",
                        help="log every S3 request (rclone's DEBUG log, which costs the server CPU) and print "
                             "requests per page and per landing by kind")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"local": [], "s3": []}
    with tempfile.TemporaryDirectory(prefix="crawl-objstore-bench-") as tmp, EmbeddedBroker(port=0) as broker:
        crawl_once("local", 50, broker, Path(tmp))  # warm-up: extensions installed and checked, caches filled
        for _ in range(args.rounds):
            for where in ("local", "s3"):
                result = crawl_once(where, args.pages, broker, Path(tmp), args.count_requests)
                results[where].append(result)
                if result["requests"]:
                    total = sum(result["requests"].values())
                    print(f"s3 requests: {total} for {result['pages']} pages and {result['landings']} landings "
                          f"({total / result['pages']:.2f} a page, {total / result['landings']:.0f} a landing): "
                          + ", ".join(f"{kind} {n}" for kind, n in result["requests"].most_common()), flush=True)
                print(f"{where}: {result['pages']:.0f} pages in {result['wall_s']:.1f} s, "
                      f"{result['pages_per_s']:.1f} pages/s, {result['cpu_ms_per_page']:.2f} CPU ms/page, "
                      f"server {result['server_cpu_ms_per_page']:.2f} CPU ms/page ({result['archive']})", flush=True)
    print("\n| Lake data and archive | pages/s (median) | crawl CPU ms/page (median) | S3 server CPU ms/page |")
    print("|---|---|---|---|")
    for where, runs in results.items():
        print(f"| {where} | {statistics.median(r['pages_per_s'] for r in runs):.1f} | "
              f"{statistics.median(r['cpu_ms_per_page'] for r in runs):.2f} | "
              f"{statistics.median(r['server_cpu_ms_per_page'] for r in runs):.2f} |")


if __name__ == "__main__":
    main()
