"""JavaScript rendering: the platform's fetch and render steps against Crawlee's PlaywrightCrawler,
on the same single-page-app site, with the same browser (Debian's /usr/bin/chromium), in one run.

The site is ``tests/sites/spa.py`` with ``--products`` product pages: every page is an app shell
whose content and links come from a script and a JSON request, so a crawler finds the products
only by rendering. Each crawler runs in a process of its own, started from "/" and following every
link of the host, rendering every page, two pages at a time:

- **platform**: the engine's steps as a batch run uses them, level by level (no Kafka, no lake):
  ``ShardFetcher`` fetches a level over HTTP and parses it, ``ShardRenderer`` (mode ``always``,
  ``CRAWL_RENDER_BROWSERS=2``) renders each page from its response through the guard proxy and
  parses the rendered DOM, whose links make the next level. No politeness delay, no archive.
- **crawlee**: ``PlaywrightCrawler`` with ``max_concurrency=2``, in-memory storage, each page
  waited on until its network is idle (the platform's settle rule) before its links are enqueued.

For each: rendered pages, wall seconds, rendered pages/s, CPU seconds of the whole process tree
(the crawler and its browsers, from ``getrusage`` of reaped children) and per rendered page, and
the peak RSS and PSS summed over the tree. Rounds alternate the two (``--rounds``);
``--crawlers platform`` runs the platform alone (Crawlee comes with the ``bench`` extra).

    .venv/bin/python benchmarks/render_compare.py --products 60 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.measure import TreeSampler, become_subreaper, children_cpu_s, loadavg

BROWSER = "/usr/bin/chromium"
CONCURRENCY = 2


def run_platform(seed: str) -> dict[str, object]:
    from crawl_platform.fetch.fetcher import Fetcher, FetchRequest  # noqa: PLC0415
    from crawl_platform.fetch.netguard import NetworkGuard  # noqa: PLC0415
    from crawl_platform.pipeline.shard import ShardFetcher  # noqa: PLC0415
    from crawl_platform.render.step import ShardRenderer  # noqa: PLC0415

    fetcher = ShardFetcher(Fetcher("bench/1.0", host_delay_s=0.0, allowed_networks=["127.0.0.1/32"]), "lxml")
    renderer = ShardRenderer(NetworkGuard(["127.0.0.1/32"]), browser_path=BROWSER, browsers=CONCURRENCY,
                             host_delay_s=0.0, timeout_s=30.0, parser="lxml")
    seen = {seed}
    level = [seed]
    rendered = products = 0
    clock = time.monotonic()
    try:
        while level:
            shard = renderer.render(fetcher.fetch([FetchRequest(u, render="always") for u in level], []))
            rendered += sum(1 for r in shard.rendering.values() if r.rendered)
            level = []
            for url, page in shard.parsed.items():
                products += "/product/" in url and bool(page.title and page.title.startswith("Product"))
                for link, _anchor in page.links:
                    if link.startswith(seed.rstrip("/")) and link not in seen:
                        seen.add(link)
                        level.append(link)
    finally:
        renderer.close()
        fetcher.close()
    return {"pages": rendered, "products": products, "seconds": time.monotonic() - clock}


def run_crawlee(seed: str) -> dict[str, object]:
    from crawlee import ConcurrencySettings  # noqa: PLC0415
    from crawlee.crawlers import PlaywrightCrawler, PlaywrightCrawlingContext  # noqa: PLC0415
    from crawlee.storage_clients import MemoryStorageClient  # noqa: PLC0415

    counts = {"pages": 0, "products": 0}
    crawler = PlaywrightCrawler(
        browser_type="chromium", headless=True,
        browser_launch_options={"executable_path": BROWSER, "chromium_sandbox": False},
        concurrency_settings=ConcurrencySettings(min_concurrency=CONCURRENCY, desired_concurrency=CONCURRENCY,
                                                 max_concurrency=CONCURRENCY),
        storage_client=MemoryStorageClient(), max_requests_per_crawl=100_000, configure_logging=False)

    @crawler.router.default_handler
    async def handle(context: PlaywrightCrawlingContext) -> None:
        await context.page.wait_for_load_state("networkidle")
        counts["pages"] += 1
        if "/product/" in context.request.url and (await context.page.title()).startswith("Product"):
            counts["products"] += 1
        await context.enqueue_links()

    clock = time.monotonic()
    asyncio.run(crawler.run([seed]))
    return {**counts, "seconds": time.monotonic() - clock}


def measure(kind: str, seed: str) -> dict[str, object]:
    """Run one crawler in a child process; its figures with the tree's CPU and peak memory."""
    cpu = children_cpu_s()
    sampler = TreeSampler(exclude=set(), interval_s=0.25).start()
    done = subprocess.run([sys.executable, __file__, "--run", kind, "--seed", seed], capture_output=True,
                          text=True, check=False, timeout=1800)
    sampler.stop()
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cpu_s"] = children_cpu_s() - cpu
    result["peak_rss_mb"] = sampler.peak_rss / 2**20
    result["peak_pss_mb"] = sampler.peak_pss / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--crawlers", default="platform,crawlee",
                        help="which to run, comma-separated (crawlee needs the bench extra)")
    parser.add_argument("--run", choices=("platform", "crawlee"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_platform(args.seed) if args.run == "platform" else run_crawlee(args.seed)))
        return
    from tests.sites.spa import SpaSite  # noqa: PLC0415

    become_subreaper()
    rows = []
    with SpaSite(products=args.products) as site:
        seed = site.base_url + "/"
        for round_ in range(1, args.rounds + 1):
            order = ("platform", "crawlee") if round_ % 2 else ("crawlee", "platform")
            for kind in [k for k in order if k in args.crawlers.split(",")]:
                load = loadavg()
                r = measure(kind, seed)
                rows.append((kind, round_, r))
                print(f"{kind:8} round {round_}: {r['pages']} pages rendered ({r['products']} products), "
                      f"{r['seconds']:.1f} s, {r['pages'] / r['seconds']:.2f} pages/s, CPU {r['cpu_s']:.1f} s "
                      f"({r['cpu_s'] / max(1, r['pages']):.3f} s/page), peak RSS {r['peak_rss_mb']:.0f} MB, "
                      f"PSS {r['peak_pss_mb']:.0f} MB (load {load})", flush=True)
    print(f"\n{'crawler':8} | pages | pages/s | CPU s/page | peak RSS MB | peak PSS MB")
    for kind in ("platform", "crawlee"):
        mine = [r for k, _n, r in rows if k == kind]
        if not mine:
            continue
        rate = sum(r["pages"] / r["seconds"] for r in mine) / len(mine)
        cpu = sum(r["cpu_s"] / max(1, r["pages"]) for r in mine) / len(mine)
        print(f"{kind:8} | {mine[0]['pages']} | {rate:.2f} | {cpu:.3f} | "
              f"{max(r['peak_rss_mb'] for r in mine):.0f} | {max(r['peak_pss_mb'] for r in mine):.0f}")


if __name__ == "__main__":
    main()
