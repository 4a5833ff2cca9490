"""Pages per second of the downstream Markdown extractor (trafilatura + htmldate, ``extract_markdown``).

Extracts every page of each corpus with :func:`crawl_platform.parse.markdown.extract_markdown`
(what the ``documents_markdown`` asset runs per archived version, the archive read aside) and
prints CPU ms per page and pages per CPU second, the best of ``--rounds``. Corpora as in
``benchmarks/main_text_cost.py``: the benchmark site's generated pages and the 530 pages of the
Python docs (``/usr/share/doc/python3.11/html``).

    .venv/bin/python benchmarks/markdown_rate.py
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.static_site import StaticSite, _render
from crawl_platform.parse.markdown import extract_markdown, extractor_name

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pages", type=int, default=1000, help="pages of the generated static site")
parser.add_argument("--rounds", type=int, default=3)
args = parser.parse_args()

corpora = {
    "static": [_render(page) for page in StaticSite(args.pages, seed=1).pages.values()],
    "python-docs": [p.read_bytes() for p in sorted(Path("/usr/share/doc/python3.11/html").rglob("*.html"))],
}
extract_markdown(b"<html><body><p>warm up</p></body></html>", "http://bench.test/")
print(f"{extractor_name()}; best of {args.rounds} rounds")
print(f"{'corpus':<12} {'pages':>6} {'CPU ms/page':>12} {'pages/CPU s':>12} {'with date':>10}")
for name, bodies in corpora.items():
    best = float("inf")
    dated = 0
    for _ in range(args.rounds):
        clock = time.process_time()
        docs = [extract_markdown(body, f"http://bench.test/{i}") for i, body in enumerate(bodies)]
        best = min(best, time.process_time() - clock)
        dated = sum(d.published_date is not None for d in docs)
    ms = best / len(bodies) * 1e3
    print(f"{name:<12} {len(bodies):>6} {ms:>12.2f} {1e3 / ms:>12.1f} {dated:>10}")
