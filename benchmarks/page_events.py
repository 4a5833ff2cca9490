"""Cost of page events per page: a landed batch's versions published on the embedded broker.

Lands ``--batches`` batches of ``--urls`` pages in a fresh lake, and after each one times what a
batch's frontier step adds for its events, ``publish_batch`` (read the batch's versions, produce
one event each and wait for the acks, record the batch), and what an idle frontier-sensor tick
adds, ``republish_unrecorded`` (the sweep of older unrecorded batches, which finds none here: its
cost is the query alone). Prints the
median per batch and the cost per page, with the embedded broker's one-record produce batches
(``batch.num.messages=1``, as ``up`` configures it):

    .venv/bin/python benchmarks/page_events.py
"""

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchResult
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.pipeline.page_events import PageEventPublisher
from crawl_platform.store.database import CrawlStore

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--batches", type=int, default=20)
parser.add_argument("--urls", type=int, default=480, help="pages per batch (480: the auto size at 250 ms)")
args = parser.parse_args()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="events-bench-"))
    with EmbeddedBroker(port=0) as broker:
        settings = Settings(lake_path=root / "lake", kafka_bootstrap_servers=broker.bootstrap_servers,
                            **EMBEDDED_BUS_SETTINGS)
        store = CrawlStore.from_settings(settings)
        bus = KafkaBus.from_settings(settings)
        bus.ensure_topics()
        events = PageEventPublisher(store, bus)
        publish_s, sweep_s = [], []
        for b in range(args.batches):
            urls = [f"http://bench.example/b{b}/p{i}" for i in range(args.urls)]
            now = datetime.now(UTC).replace(tzinfo=None)
            results = {u: FetchResult(u, u, 200, "text/html", f"<p>{u}</p>".encode(), None, now, 1.0) for u in urls}
            batch_id = f"e0.p0-{b * args.urls}-{(b + 1) * args.urls}"
            land_batch(store, batch_id, [FrontierURL("bench", u, 1) for u in urls], results, {})
            clock = time.perf_counter()
            published = events.publish_batch(batch_id)
            publish_s.append(time.perf_counter() - clock)
            assert published.events == args.urls, published
            clock = time.perf_counter()
            events.republish_unrecorded()
            sweep_s.append(time.perf_counter() - clock)
        bus.close()
    pages = args.batches * args.urls
    print(f"{args.batches} batches x {args.urls} pages on the embedded broker ({pages} events)")
    print(f"publish_batch: median {statistics.median(publish_s) * 1000:.1f} ms a batch, "
          f"{sum(publish_s) / pages * 1000:.3f} ms a page")
    print(f"sweep (republish_unrecorded, nothing to send): median {statistics.median(sweep_s) * 1000:.1f} ms a batch, "
          f"last {sweep_s[-1] * 1000:.1f} ms with {pages} pages in the lake")


if __name__ == "__main__":
    main()
