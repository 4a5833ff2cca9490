"""The platform against Scrapy and Crawlee on the same generated site, in one run.

Generates a deterministic site of N article pages (`static_site.py`), serves it with nginx on
127.0.0.1, measures the server's own requests/s, then crawls it:

  1. with the platform, as a user runs it (`--mode dagster`: embedded broker, Dagster daemon,
     `crawl-platform crawl SEED --wait`) and/or with its engine in a plain loop (`--mode engine`);
  2. with a plain follow-all-links Scrapy CrawlSpider (robots.txt obeyed) at the same per-host
     concurrency as the platform (one connection per host), and at any extra `--scrapy-concurrency`;
  3. with Crawlee for Python's ParselCrawler (robots.txt obeyed) set up as its guide shows, at each
     `--crawlee-concurrency` (per host: Crawlee limits concurrency for the whole crawl, so it gets
     that times the number of hosts). Crawlee has no per-host delay under a second, so it does not
     run with `--host-delay-ms`.

For each it prints pages, wall seconds, pages/s, CPU seconds of its processes, peak memory summed
over its processes, seconds from seed to first page, whether every expected page landed exactly
once, for the platform the seconds from a page's fetch to the lake snapshot that shows it (p50,
p95), and the load average around it; then the platform's ratios to each peer and, for the Dagster mode,
where the wall time went (from the Dagster event log). Loopback only; every process it starts is
stopped on the way out, Ctrl-C and errors included; a platform crawl past `--platform-timeout` is
stopped and its partial rate reported.

    .venv/bin/python benchmarks/compare.py --pages 2000 --mode both

With `--hosts N` the site is the polite broad crawl's instead: `--pages-per-host` articles (plus a
home page) on each of N loopback hostnames (127.0.1.1, ...), all seeded at once, every crawler
keeping `--host-delay-ms` between two requests to one host (Scrapy's DOWNLOAD_DELAY, not
randomised) with one request per host in flight. Each crawler's smallest gap between two requests
to one host, from nginx's log, shows that the politeness held:

    .venv/bin/python benchmarks/compare.py --hosts 500 --pages-per-host 40 --host-delay-ms 250

With `--docs` the site is a real one nobody here wrote: Debian's Python 3.11 documentation
(`apt-get install python3.11-doc`), 527 pages with some huge index pages, served by nginx from
where it is installed; the pages to land are a BFS over its files' links (`static_site.py`):

    .venv/bin/python benchmarks/compare.py --docs

With `--recrawl` (Dagster mode) the same stack crawls the site a second time under another crawl
id, on the same lake, and a note gives that pass's wall time, CPU and new versions; with
`--no-validators` nginx sends no ETag and answers conditional requests in full, as many dynamic
servers do, so the recrawl gets every body again:

    .venv/bin/python benchmarks/compare.py --docs --no-validators --recrawl --scrapy-concurrency
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import crawlers
from crawlers import CrawlResult, crawl_with_peer, crawl_with_platform
from dagster_profile import CATEGORIES, RunProfile, profile_dagster_home
from docs_site import serve_docs
from engine_profile import profile_engine
from measure import become_subreaper, loadavg
from static_site import measure_server_rate, serve_hosts, serve_site


def _stop_on_sigterm(_sig: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds through every `finally` and context manager below


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000, help="article pages of the site (2000)")
    parser.add_argument("--hosts", type=int, default=0,
                        help="serve the many-host site instead: this many loopback hostnames (0: one host)")
    parser.add_argument("--pages-per-host", type=int, default=40, help="articles per host with --hosts (40)")
    parser.add_argument("--docs", action="store_true",
                        help="crawl the Python 3.11 documentation (python3.11-doc) instead of a generated site")
    parser.add_argument("--mode", choices=["dagster", "engine", "both", "none"], default="dagster",
                        help="how to run the platform: through Dagster as a user does, engine only, both, or not")
    parser.add_argument("--scrapy-concurrency", type=int, nargs="*", default=[1],
                        help="Scrapy per-host concurrency, one crawl each; the first is the comparison (1)")
    parser.add_argument("--crawlee-concurrency", type=int, nargs="*", default=[1],
                        help="Crawlee per-host concurrency, one crawl each (1; none without a value)")
    parser.add_argument("--batch-size", type=int, default=0, help="CRAWL_BATCH_SIZE (0, the default: auto)")
    parser.add_argument("--host-delay-ms", type=int, default=0, help="CRAWL_HOST_DELAY_MS (0: local server)")
    parser.add_argument("--host-concurrency", type=int, default=1,
                        help="CRAWL_HOST_CONCURRENCY: the platform's requests in flight per host (1); give Scrapy "
                        "the same with --scrapy-concurrency")
    parser.add_argument("--max-concurrent-runs", type=int, default=4, help="Dagster run coordinator limit (4)")
    parser.add_argument("--platform-timeout", type=float, default=600.0,
                        help="stop a platform crawl after this many seconds and report its partial rate (600)")
    parser.add_argument("--scrapy-timeout", type=float, default=900.0,
                        help="stop a peer crawler (Scrapy or Crawlee) after this many seconds (900)")
    parser.add_argument("--py-spy", action="store_true",
                        help="afterwards, crawl once more with the engine under py-spy and split its time by step")
    parser.add_argument("--writer-pool-limit", type=int, default=0,
                        help="lake writer steps at once across runs (the crawl_duckdb_writer pool; "
                             "0, the default: --max-concurrent-runs)")
    parser.add_argument("--reader", action="store_true",
                        help="also crawl with the platform while a notebook (a read-only DuckDB) holds the lake open")
    parser.add_argument("--recrawl", action="store_true",
                        help="with --mode dagster: crawl the site once more under another crawl id, on the same "
                             "stack and lake, and note what that pass cost")
    parser.add_argument("--no-validators", action="store_true",
                        help="nginx sends no ETag and ignores conditional requests (docs and generated site)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (site, logs, DuckDB)")
    args = parser.parse_args()
    if args.pages < 2 or args.pages_per_host < 2:
        parser.error("--pages and --pages-per-host must be at least 2")
    if not 0 <= args.hosts <= 63_500:
        parser.error("--hosts must be between 0 and 63,500")

    crawlers.WRITER_POOL_LIMIT = args.writer_pool_limit
    os.environ["CRAWL_HOST_CONCURRENCY"] = str(args.host_concurrency)  # Settings() of every crawl reads it
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    subreaper = become_subreaper()
    workdir = Path(tempfile.mkdtemp(prefix="crawl-compare-"))
    results: list[CrawlResult] = []
    profiles: dict[str, RunProfile] = {}
    engine_split: dict[str, float] = {}
    try:
        validators = not args.no_validators
        served = (serve_docs(workdir, validators=validators) if args.docs
                  else serve_hosts(args.hosts, args.pages_per_host, workdir) if args.hosts
                  else serve_site(args.pages, workdir, validators=validators))
        with served as site:
            shape = ("the Python 3.11 documentation" if args.docs
                     else f"{args.hosts} hosts x ({args.pages_per_host} articles + home)" if args.hosts
                     else f"{args.pages} articles + home")
            print(f"site: {len(site.expected)} pages to land ({shape}; /private/ disallowed), "
                  f"{site.bytes_on_disk / 2**20:.1f} MiB, served by {site.server_kind} on {site.base_url}")
            print(f"machine: {os.cpu_count()} cores, load average {loadavg()}; workdir {workdir}"
                  f"{'' if subreaper else '; not a subreaper: CPU of orphaned processes may be missed'}")
            rate = measure_server_rate(site.base_url + ("/library/functions.html" if args.docs else "/articles/1.html"))
            print("server alone: " + ", ".join(f"{k} = {v:,.0f}" for k, v in rate.items()), flush=True)
            modes = {"both": ["engine", "dagster"], "none": []}.get(args.mode, [args.mode])
            for mode in modes:
                print(f"crawling with the platform ({mode}) ...", flush=True)
                result = crawl_with_platform(site, workdir / f"platform-{mode}", mode, args.batch_size,
                                             args.host_delay_ms, args.max_concurrent_runs, args.platform_timeout,
                                             recrawl=args.recrawl and mode == "dagster")
                results.append(result)
                _print_row(result)
                if mode == "dagster" and args.reader:
                    print("crawling with the platform (dagster) while a reader holds the lake ...", flush=True)
                    held = crawl_with_platform(site, workdir / "platform-reader", mode, args.batch_size,
                                               args.host_delay_ms, args.max_concurrent_runs, args.platform_timeout,
                                               reader=True)
                    results.append(held)
                    _print_row(held)
                if mode == "dagster" and result.workdir is not None:
                    try:
                        profiles[result.crawler] = profile_dagster_home(result.workdir / "dagster_home",
                                                                        result.window)
                    except Exception as err:  # a profile is a bonus: keep the measurements
                        result.notes.append(f"no Dagster profile: {type(err).__name__}: {err}")
            peers = [("Scrapy", conc) for conc in args.scrapy_concurrency]
            if args.host_delay_ms and args.crawlee_concurrency:
                print("not crawling with Crawlee: it has no per-host delay under a second", flush=True)
            else:
                peers += [("Crawlee", conc) for conc in args.crawlee_concurrency]
            for peer, conc in peers:
                print(f"crawling with {peer} (per-host concurrency {conc}) ...", flush=True)
                result = crawl_with_peer(peer, site, workdir / f"{peer.lower()}-c{conc}", conc, args.scrapy_timeout,
                                         args.host_delay_ms)
                results.append(result)
                _print_row(result)
            if args.py_spy:
                print("profiling the engine with py-spy (not a measured run) ...", flush=True)
                engine_split = profile_engine(site, workdir / "py-spy", args.batch_size, args.host_delay_ms,
                                              args.platform_timeout)
    except KeyboardInterrupt:
        print("interrupted: every process started was stopped", file=sys.stderr)
        return 130
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    _report(args, results, profiles)
    if engine_split:
        total = sum(engine_split.values())
        print(f"\nplatform (engine) under py-spy: where the main thread's {total:.1f} s went")
        for step, seconds in engine_split.items():
            print(f"  {step:<52} {seconds:6.1f} s  {100 * seconds / total:5.1f} %")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "cores": os.cpu_count(),
                                         "results": [_jsonable(r) for r in results],
                                         "profiles": {k: asdict(v) for k, v in profiles.items()},
                                         "engine_py_spy_s": engine_split}, indent=1))
    return 0 if all(r.completed for r in results) else 1


def _jsonable(result: CrawlResult) -> dict[str, object]:
    d = asdict(result)
    d["workdir"] = str(d["workdir"])
    d["pages_per_s"], d["exactly_once"] = result.pages_per_s, result.exactly_once
    return d


def _print_row(r: CrawlResult) -> None:
    print(f"  {r.crawler}: {r.pages}/{r.expected} pages in {r.wall_s:.1f} s = {r.pages_per_s:.1f} pages/s, "
          f"CPU {r.cpu_window_s:.1f} s, peak RSS {r.peak_rss_mb:.0f} MB, load {r.load_before} -> {r.load_after}"
          f"{'' if r.completed else ' (STOPPED: partial)'}", flush=True)


def _once(r: CrawlResult) -> str:
    if r.exactly_once:
        return "yes"
    parts = [f"{len(r.duplicates)} twice" if r.duplicates else "", f"{r.missing} missing" if r.missing else "",
             f"{r.unexpected} unexpected" if r.unexpected else "", "" if r.completed else "stopped"]
    return "no: " + ", ".join(p for p in parts if p)


def _report(args: argparse.Namespace, results: list[CrawlResult], profiles: dict[str, RunProfile]) -> None:
    shape = ("the Python 3.11 docs" if args.docs else f"{args.hosts} hosts x {args.pages_per_host} articles"
             if args.hosts else f"{args.pages} articles")
    print(f"\n{shape}, batch size {args.batch_size}, host delay {args.host_delay_ms} ms, "
          f"host concurrency {args.host_concurrency}, "
          f"{os.cpu_count()} cores")
    head = ("crawler", "pages", "wall s", "pages/s", "CPU s", "CPU s incl. start-up", "CPU ms/page",
            "peak RSS MB (PSS)", "seed->1st page s", "exactly once", "requests",
            "min gap per host ms (hosts too close)", "largest fetch gap s", "fetch -> visible s p50, p95",
            "load avg before -> after")
    rows = [(r.crawler, f"{r.pages}/{r.expected}", f"{r.wall_s:.1f}", f"{r.pages_per_s:.1f}", f"{r.cpu_window_s:.1f}",
             f"{r.cpu_total_s:.1f}", f"{1000 * r.cpu_window_s / r.pages:.1f}" if r.pages else "-",
             f"{r.peak_rss_mb:.0f} ({r.peak_pss_mb:.0f})", f"{r.first_page_s:.1f}", _once(r), str(r.requests_served),
             f"{r.min_gap_ms:.0f} ({r.hosts_too_close})", f"{r.max_fetch_gap_s:.1f}",
             f"{r.visible_s[0]:.1f}, {r.visible_s[1]:.1f}", f"{r.load_before} -> {r.load_after}") for r in results]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for r in results:
        for note in r.notes:
            print(f"  note, {r.crawler}: {note}")
    platform = [r for r in results if r.crawler.startswith("platform") and r.pages]
    for name in ("Scrapy", "Crawlee"):
        peer = next((r for r in results if r.crawler.startswith(name)), None)
        if not (platform and peer and peer.pages):
            continue
        print(f"\nratio platform / {peer.crawler}:")
        for r in platform:
                print(f"  {r.crawler}: pages/s x{r.pages_per_s / peer.pages_per_s:.3f}, "
                      f"CPU per page x{(r.cpu_window_s / r.pages) / (peer.cpu_window_s / peer.pages):.2f}, "
                      f"peak RSS x{r.peak_rss_mb / peer.peak_rss_mb:.1f}, "
                      f"seed->first page x{r.first_page_s / peer.first_page_s:.1f}")
    for name, p in profiles.items():
        wall = sum(p.wall_split_s.values())
        print(f"\n{name}: where the {wall:.1f} s of wall time went ({p.runs} runs, {p.batch_runs} batch runs, "
              f"{p.messages} frontier messages, largest batch {p.largest_batch}, {p.failed_runs} failed runs)")
        for cat in CATEGORIES:
            s = p.wall_split_s.get(cat, 0.0)
            print(f"  {cat:<24} {s:7.1f} s  {100 * s / wall if wall else math.nan:5.1f} %   "
                  f"(summed over runs: {p.summed_s.get(cat, 0.0):.1f} s)")
        meta = p.batch_metadata_s
        print("  inside the batch steps (batch metadata): " + ", ".join(f"{k} {v:.1f} s" for k, v in meta.items()))
        for failure in p.failures[:10]:
            print(f"  failure: {failure}")


if __name__ == "__main__":
    sys.exit(main())
