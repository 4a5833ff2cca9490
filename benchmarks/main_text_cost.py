"""What inline main content costs the parse step per page: ``parse_html`` without and with it.

For each corpus, parses every page with ``parse_html(..., main_content=False)`` (the parse step
without main content: title, text, links by lxml) and with ``main_content=True`` (plus Resiliparse's
main text, ``detect_fast`` and the SimHash), alternating round by round, ``--rounds`` times, and
prints the best round's CPU milliseconds per page for both (process time, so that other
processes on a shared machine count less than in wall time), the difference, and the parts of the
difference (lexbor parse + ``extract_plain_text``, language, SimHash) timed alone. Corpora:
- ``static``: the 20k-page benchmark site's pages (``benchmarks/static_site.py``, ``--pages`` of them);
- ``demo``: the bundled demo site's pages (``crawl_platform/cli/demo_site.py``);
- ``python-docs``: the 530 pages of Debian's python3.11-doc (``/usr/share/doc/python3.11/html``),
  a real site of large pages (95 KB on average).

    .venv/bin/python benchmarks/main_text_cost.py
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree
from resiliparse.parse.lang import detect_fast

from benchmarks.static_site import StaticSite, _render
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.parse.encoding import decode_html
from crawl_platform.parse.html import parse_html
from crawl_platform.parse.main_text import extract_main_content, extractor_name
from crawl_platform.parse.simhash import simhash64

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pages", type=int, default=2000, help="pages of the generated static site")
parser.add_argument("--rounds", type=int, default=9, help="rounds per variant; the best one counts")
args = parser.parse_args()


def corpora() -> dict[str, list[bytes]]:
    static = StaticSite(args.pages, seed=1)
    demo = DemoSite(n_pages=300, seed=0)
    docs = sorted(PYTHON_DOCS.rglob("*.html"))
    return {
        "static": [_render(page) for page in static.pages.values()],
        "demo": [body for path in demo.paths() if (body := demo.body(path)).lstrip().startswith(b"<")],
        "python-docs": [p.read_bytes() for p in docs],
    }


def best_ms(variants: list[Callable[[bytes], object]], bodies: list[bytes]) -> list[float]:
    """Each variant's best round, the variants alternating round by round (so load drifts hit both)."""
    rounds: list[list[float]] = [[] for _ in variants]
    for _ in range(args.rounds):
        for timings, fn in zip(rounds, variants, strict=True):
            clock = time.process_time()
            for body in bodies:
                fn(body)
            timings.append((time.process_time() - clock) / len(bodies) * 1e3)
    return [min(timings) for timings in rounds]


def parts_ms(bodies: list[bytes]) -> tuple[float, float, float]:
    texts = [decode_html(b, None).text for b in bodies]
    mains = [extract_plain_text(HTMLTree.parse(t), main_content=True) for t in texts]
    extract = min(_timed(lambda: [extract_plain_text(HTMLTree.parse(t), main_content=True) for t in texts])
                  for _ in range(args.rounds))
    lang = min(_timed(lambda: [detect_fast(m) for m in mains]) for _ in range(args.rounds))
    fingerprint = min(_timed(lambda: [simhash64(m) for m in mains]) for _ in range(args.rounds))
    return tuple(s / len(bodies) * 1e3 for s in (extract, lang, fingerprint))  # type: ignore[return-value]


def _timed(fn: Callable[[], object]) -> float:
    clock = time.process_time()
    fn()
    return time.process_time() - clock


print(f"{extractor_name()}; best of {args.rounds} rounds; CPU ms per page")
print(f"{'corpus':<12} {'pages':>6} {'KB/page':>8} {'before':>8} {'after':>8} {'extra':>8} "
      f"{'extract':>8} {'lang':>6} {'simhash':>8} {'words':>7}")
for name, bodies in corpora().items():
    extract_main_content("<p>warm up</p>")
    before, after = best_ms([lambda b: parse_html(b, "http://bench.test/", "text/html", main_content=False),
                             lambda b: parse_html(b, "http://bench.test/", "text/html")], bodies)
    extract, lang, fingerprint = parts_ms(bodies)
    words = statistics.mean(len((parse_html(b, "http://bench.test/").main.text or "").split())  # type: ignore[union-attr]
                            for b in bodies)
    kb = statistics.mean(len(b) for b in bodies) / 1024
    print(f"{name:<12} {len(bodies):>6} {kb:>8.1f} {before:>8.3f} {after:>8.3f} {after - before:>8.3f} "
          f"{extract:>8.3f} {lang:>6.3f} {fingerprint:>8.3f} {words:>7.0f}")
