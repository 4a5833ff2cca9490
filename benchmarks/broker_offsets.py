"""The embedded broker's CPU for a watermark read as a partition's log grows.

Starts Tansu (the embedded broker) with a two-partition topic and fills one partition with
frontier-sized messages, 1,000 per publish, batched as the platform's producer does (with
``--one-record-batches``, one record per batch). At each size in
``--at`` it prints the broker's own CPU (``/proc/PID/stat``) for one ``KafkaBus.watermarks``
read of the full partition (the broker's watermark; then the log's true end as
``KAFKA_EXACT_LOG_ENDS`` finds it), of the empty one, and for a read of the last ``--tail``
records, each averaged over ``--repeat`` calls (nan: the broker did not answer within the bus's
10 s timeout), and the broker's RSS. ``--compression`` sets the producer's batch compression
(``KAFKA_COMPRESSION``; the platform's default, lz4, unless given):

    .venv/bin/python benchmarks/broker_offsets.py --at 10000 50000 100000 --repeat 10
    .venv/bin/python benchmarks/broker_offsets.py --at 1000000 2000000 --repeat 1 --compression none
"""

import argparse
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from measure import _memory

from crawl_platform.bus.base import BusError
from crawl_platform.bus.broker import EmbeddedBroker, free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.offsets import OffsetRange

TICK = os.sysconf("SC_CLK_TCK")
MESSAGE = b'{"crawl_id": "c", "url": "http://h/%d/some/article/path.html", "depth": 3, "priority": 0}'


def broker_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", type=int, nargs="+", default=[10_000, 50_000, 100_000],
                        help="log sizes (records in partition 0) to measure at")
    parser.add_argument("--repeat", type=int, default=10, help="calls averaged per figure (10)")
    parser.add_argument("--tail", type=int, default=1000, help="records read from the log's end (1000)")
    parser.add_argument("--one-record-batches", action="store_true", help="send one record per batch")
    parser.add_argument("--compression", default="lz4", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        help="the producer's batch compression (lz4, the platform's default)")
    args = parser.parse_args()
    with EmbeddedBroker(port=free_port()) as broker:
        assert broker._process is not None
        pid = broker._process.pid
        bus = KafkaBus({"bootstrap.servers": broker.bootstrap_servers}, "seeds", "frontier", "dead", 2,
                       producer_config={"batch.num.messages": "1"} if args.one_record_batches else {},
                       compression=args.compression)
        exact = KafkaBus({"bootstrap.servers": broker.bootstrap_servers}, "seeds", "frontier", "dead", 2,
                         exact_log_ends=True, compression=args.compression)
        bus.ensure_topics()
        filled = 0

        def each_ms(call: Callable[[], object], repeat: int) -> tuple[float, float]:
            cpu0, wall0 = broker_cpu_s(pid), time.monotonic()
            for _ in range(repeat):
                try:
                    call()
                except BusError:  # the broker did not answer in the bus's timeout
                    return float("nan"), float("nan")
            return ((broker_cpu_s(pid) - cpu0) / repeat * 1000, (time.monotonic() - wall0) / repeat * 1000)

        print(f"{'records':>8} | watermarks, full partition | true end, full partition | "
              f"watermarks, empty partition | last {args.tail} records | broker RSS")
        for size in sorted(args.at):
            while filled < size:
                chunk = min(1000, size - filled)
                # key b"h" lands in one partition; which one is the bus's choice, so find it below
                bus.publish("frontier", [(b"h", MESSAGE % i) for i in range(filled, filled + chunk)])
                filled += chunk
            # One record per batch keeps the broker's watermark right (and its tail unreadable when deep).
            marks = (bus if args.one_record_batches else exact).watermarks("frontier")
            full = max(marks, key=lambda p: marks[p][1])
            (empty,) = [p for p in marks if p != full]
            high = marks[full][1]
            rows = [
                each_ms(partial(bus.watermarks, "frontier", skip={empty}), args.repeat),
                each_ms(partial(exact.watermarks, "frontier", skip={empty}), args.repeat),
                each_ms(partial(bus.watermarks, "frontier", skip={full}), args.repeat),
                each_ms(partial(bus.read_range, "frontier", OffsetRange(full, max(0, high - args.tail), high)),
                        max(1, args.repeat // 5)),
            ]
            print(f"{size:>8} | " + " | ".join(f"{cpu:7.1f} ms CPU ({wall:6.1f} ms wall)" for cpu, wall in rows)
                  + f" | {_memory(pid, pss_too=False)[0] / 2**20:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
