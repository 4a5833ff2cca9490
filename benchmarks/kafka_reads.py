"""Range reads from the embedded broker at growing depth: what a batch run's plan step does.

Starts Tansu (the embedded broker), publishes ``--records`` frontier messages to one partition,
one record per batch as `up` configures the producer, then times `KafkaBus.read_range` of
``--range`` records at several depths, once per consumer fetch wait (`fetch.wait.max.ms`):

    .venv/bin/python benchmarks/kafka_reads.py --records 20000 --range 2000 --waits 20 500

With ``--tail N`` it publishes ``--records`` messages over N partitions with the platform's own
producer settings (which batch, so the embedded broker's high watermark falls short of each
partition's end) and times reading one partition's whole log, as a batch run's plan step does:

    .venv/bin/python benchmarks/kafka_reads.py --records 1000 --tail 8
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawl_platform.bus.broker import EmbeddedBroker, free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.offsets import OffsetRange


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--range", type=int, default=2000)
    parser.add_argument("--waits", type=int, nargs="+", default=[20, 500], help="fetch.wait.max.ms values")
    parser.add_argument("--tail", type=int, default=0, metavar="N",
                        help="time whole-log reads of one of N partitions written by a batching producer")
    args = parser.parse_args()
    if args.tail:
        tail_reads(args.records, args.tail)
        return
    with EmbeddedBroker(port=free_port()) as broker:
        bus = KafkaBus({"bootstrap.servers": broker.bootstrap_servers}, "seeds", "frontier", "dead", 1,
                       producer_config={"batch.num.messages": "1"})
        bus.ensure_topics()
        for start in range(0, args.records, 1000):
            bus.publish("frontier", [(b"host", b'{"crawl_id": "c", "url": "http://h/%d", "depth": 1}' % i)
                                     for i in range(start, min(args.records, start + 1000))])
        depths = list(range(0, args.records - args.range + 1, max(1, args.records // 4)))
        consumer = bus._consumer
        for wait in args.waits:
            bus._consumer = lambda _wait=wait, **_kw: consumer(fetch_wait_ms=_wait)  # type: ignore[method-assign]
            figures = []
            for depth in depths:
                started = time.perf_counter()
                records = bus.read_range("frontier", OffsetRange(0, depth, depth + args.range))
                assert len(records) == args.range
                figures.append(f"{depth}: {time.perf_counter() - started:.2f} s")
            print(f"fetch.wait.max.ms={wait}: read {args.range} records at depth " + ", ".join(figures), flush=True)
        bus.close()


def tail_reads(records: int, partitions: int, repeats: int = 10) -> None:
    with EmbeddedBroker(port=free_port()) as broker:
        bus = KafkaBus({"bootstrap.servers": broker.bootstrap_servers}, "seeds", "frontier", "dead", partitions)
        bus.ensure_topics()
        bus.publish("frontier", [(b"host%d" % (i % 50), b'{"crawl_id": "c", "url": "http://h/%d", "depth": 1}' % i)
                                 for i in range(records)])
        part, (low, high) = max(bus.log_ends("frontier").items(), key=lambda item: item[1][1])
        watermark = bus.watermarks("frontier")[part][1]
        for _round in range(3):
            started = time.perf_counter()
            for _ in range(repeats):
                assert len(bus.read_range("frontier", OffsetRange(part, low, high))) == high - low
            print(f"partition {part}: {high - low} records (high watermark {watermark}), "
                  f"read_range {(time.perf_counter() - started) / repeats * 1000:.1f} ms", flush=True)
        bus.close()


if __name__ == "__main__":
    main()
