"""What extraction rules cost, on the Python 3.11 documentation (Debian's python3.11-doc, 530 pages).

Two figures: the engine alone (the rules applied to the 530 pages held in memory: parse, select,
clean, type), and the whole downstream path that the ``records`` asset runs after a crawl
(``extract_crawl``: the archive read back, extraction, landing in the lake), after crawling the
docs served on loopback with the engine's crawl loop and an embedded broker. Prints pages/s and
records/s for the one-record-per-page rules and for a ``base`` rule with many records per page.

    .venv/bin/python benchmarks/extract_cost.py              # both
    .venv/bin/python benchmarks/extract_cost.py --engine-only
"""

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.config import Settings
from crawl_platform.extract.engine import Extractor, PageBody
from crawl_platform.extract.records import set_rules
from crawl_platform.extract.rules import load_rules
from crawl_platform.extract.run import extract_crawl
from crawl_platform.store.database import CrawlStore
from tests.sites.docs import DOCS_ROOT, DocsSite, crawl_docs

RULES = {name: ROOT / "examples" / "extract" / f"{name}.yaml" for name in ("python_docs", "python_functions")}


def engine_only(repeat: int) -> None:
    files = sorted(DOCS_ROOT.rglob("*.html"))
    pages = [PageBody(f"http://docs.test/{f.relative_to(DOCS_ROOT)}", 1, f.read_bytes()) for f in files]
    megabytes = sum(len(p.body) for p in pages) / 1e6
    for name, path in RULES.items():
        extractor = Extractor(load_rules(path))
        best = float("inf")
        records = 0
        for _ in range(repeat):
            started = time.perf_counter()
            records = sum(len(result.records) for result in extractor.extract_all(pages))
            best = min(best, time.perf_counter() - started)
        applied = sum(1 for p in pages if extractor.applies_to(p.url))
        print(f"engine {name}: {applied} pages ({megabytes:.0f} MB in all), {records} records in {best:.2f} s "
              f"(best of {repeat}): {applied / best:.0f} pages/s, {records / best:.0f} records/s, "
              f"{best / applied * 1000:.2f} ms/page")


def from_archive() -> None:
    pages = tuple(str(f.relative_to(DOCS_ROOT)) for f in sorted(DOCS_ROOT.rglob("*.html")))
    with EmbeddedBroker(port=0) as broker, DocsSite() as docs:
        tag = uuid.uuid4().hex[:6]
        settings = Settings(kafka_bootstrap_servers=broker.bootstrap_servers,
                            **EMBEDDED_BUS_SETTINGS, frontier_topic=f"f-{tag}",
                            seeds_topic=f"s-{tag}", dead_letter_topic=f"d-{tag}", host_delay_ms=0,
                            allowed_networks=["127.0.0.0/8"], batch_size=200,
                            lake_path=Path(tempfile.mkdtemp()) / "lake")
        bus = KafkaBus.from_settings(settings)
        bus.ensure_topics()
        store = CrawlStore.from_settings(settings)
        started = time.perf_counter()
        crawl_docs(settings, bus, store, docs, "docs", load_rules(RULES["python_docs"]), pages=pages)
        print(f"crawled {len(pages)} pages in {time.perf_counter() - started:.1f} s (not part of the figures)")
        for name, path in RULES.items():
            set_rules(store, "docs", load_rules(path))
            requests = len(docs.requests)
            started = time.perf_counter()
            report = extract_crawl(store, "docs")
            seconds = time.perf_counter() - started
            assert len(docs.requests) == requests, "extraction reached the server"
            print(f"archive → records {name}: {report.pages} pages, {report.records} records in {seconds:.2f} s: "
                  f"{report.pages / seconds:.0f} pages/s, {report.records / seconds:.0f} records/s "
                  f"(archive read, extraction, landing; {report.page_errors} page errors)")
        bus.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine-only", action="store_true", help="skip the crawl and the archive run")
    parser.add_argument("--repeat", type=int, default=3, help="engine runs, the best is kept")
    args = parser.parse_args()
    engine_only(args.repeat)
    if not args.engine_only:
        from_archive()


if __name__ == "__main__":
    main()
