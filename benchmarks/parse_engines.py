"""What each ``CRAWL_PARSER`` engine costs per page for title, text and links, and whether they agree.

For each corpus, runs :func:`crawl_platform.parse.html.parse_html` as the crawl does (main content
on: Resiliparse's step is the same whatever the engine, and its nesting check is what keeps a
page too deep for lexbor from selectolax) with each engine in turn, round by round, ``--rounds``
times, and prints the best round's CPU milliseconds per page (process time) and how many pages
gave exactly lxml's title, text and links. With ``--no-main-content`` the engines' part alone
(selectolax then pays the nesting check itself on pages over 16 KB). Corpora:
- ``static``: the generated benchmark site's pages (``benchmarks/static_site.py``, ``--pages`` of them);
- ``python-docs``: the 530 pages of Debian's python3.11-doc (``/usr/share/doc/python3.11/html``),
  a real site of large pages (95 KB on average, up to 2.5 MB).

    .venv/bin/python benchmarks/parse_engines.py [--engines selectolax lxml bs4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import get_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.static_site import StaticSite, _render
from crawl_platform.parse.html import ParsedPage, ParserEngine, parse_html

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
HTML_UTF8 = "text/html; charset=utf-8"


def corpora(pages: int) -> dict[str, list[tuple[bytes, str]]]:
    static = StaticSite(pages, seed=1)
    out = {"static": [(_render(page), f"http://127.0.0.1:8000/{i}.html")
                      for i, page in enumerate(static.pages.values())]}
    if PYTHON_DOCS.is_dir():
        out["python-docs"] = [(p.read_bytes(), "http://127.0.0.1:8000/" + p.relative_to(PYTHON_DOCS).as_posix())
                              for p in sorted(PYTHON_DOCS.rglob("*.html"))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages of the generated static site (2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per engine; the best one counts (5)")
    parser.add_argument("--engines", nargs="+", choices=get_args(ParserEngine), default=["selectolax", "lxml"])
    parser.add_argument("--no-main-content", dest="main_content", action="store_false")
    args = parser.parse_args()
    for name, bodies in corpora(args.pages).items():
        best = dict.fromkeys(args.engines, float("inf"))
        results: dict[str, list[ParsedPage]] = {}
        for _ in range(args.rounds):
            for engine in args.engines:  # alternating, so that load drifts hit every engine
                started = time.process_time()
                results[engine] = [parse_html(body, url, HTML_UTF8, engine, main_content=args.main_content)
                                   for body, url in bodies]
                best[engine] = min(best[engine], time.process_time() - started)
        reference = results.get("lxml") or parse_all(bodies)
        print(f"{name}: {len(bodies)} pages, {sum(len(b) for b, _ in bodies) / 2**20:.1f} MiB, "
              f"main content {'on' if args.main_content else 'off'}")
        for engine in args.engines:
            same = sum(_fields(a) == _fields(b) for a, b in zip(results[engine], reference, strict=True))
            print(f"  {engine:<11} {best[engine] / len(bodies) * 1000:7.3f} ms/page   "
                  f"same title, text and links as lxml: {same}/{len(bodies)}")


def _fields(page: ParsedPage) -> tuple[object, ...]:
    return page.title, page.text, page.links


def parse_all(bodies: list[tuple[bytes, str]]) -> list[ParsedPage]:
    return [parse_html(body, url, HTML_UTF8, "lxml", main_content=False) for body, url in bodies]


if __name__ == "__main__":
    main()
