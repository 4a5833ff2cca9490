"""What resolving links costs the parse step, with the caches a new parse worker starts with (empty).

A batch run's parse workers are new processes, so the per-process cache of canonical URLs starts
empty in every run, and a site's pages link URLs the worker has not seen. Parses ``--pages`` pages
of the generated benchmark site (``benchmarks/static_site.py``, a ``--site-pages`` site) with
``parse_html`` without and with main text, and resolves every link of them with ``resolve_link``,
clearing the URL caches before each round; prints the best round's CPU (process time) per page and
per link. ``--repo`` runs another checkout's code (its ``crawl_platform``) with this script:

    .venv/bin/python benchmarks/link_resolution.py
    .venv/bin/python benchmarks/link_resolution.py --repo /tmp/before
"""

import argparse
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pages", type=int, default=3000, help="pages parsed per round (3000)")
parser.add_argument("--site-pages", type=int, default=20000, help="articles of the generated site (20000)")
parser.add_argument("--rounds", type=int, default=5)
parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the checkout whose crawl_platform is measured (this one)")
args = parser.parse_args()
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(args.repo.resolve()))

from static_site import StaticSite, _render

import crawl_platform.urls as urls
from crawl_platform.parse.html import parse_html

BASE = "http://127.0.0.1:8080"


def clear_caches() -> None:
    for name in ("_canonical", "_origin", "_folder"):
        cached = getattr(urls, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


def main() -> None:
    site = StaticSite(args.site_pages)
    chosen = list(site.pages.items())[: args.pages]
    bodies = [(path, _render(page)) for path, page in chosen]
    links = [(BASE + path, href) for path, page in chosen for href, _anchor in page.links]
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for main_content in (False, True):
            clear_caches()
            started = time.process_time()
            for path, body in bodies:
                parse_html(body, BASE + path, "text/html", main_content=main_content)
            key = f"parse_html main_content={main_content}, ms a page"
            best[key] = min(best.get(key, float("inf")), (time.process_time() - started) * 1000 / len(bodies))
        clear_caches()
        started = time.process_time()
        for base, href in links:
            urls.resolve_link(base, href)
        key = "resolve_link, us a link"
        best[key] = min(best.get(key, float("inf")), (time.process_time() - started) * 1e6 / len(links))
    print(f"{args.repo}: {len(bodies)} pages of a {args.site_pages}-page site, {len(links) / len(bodies):.1f} "
          f"links a page, best of {args.rounds} rounds, caches cleared each round")
    for key, value in best.items():
        print(f"  {key}: {value:.3f}")


if __name__ == "__main__":
    main()
