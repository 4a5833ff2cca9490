"""What a sensor tick's read of a topic costs: this process's CPU, the embedded broker's CPU and the
wall time of ``read_topic`` (watermarks and the topic's id) on a new bus, as every tick builds one
(see docs/benchmarks.md).

Starts the embedded broker on a free port, creates the topics, publishes ``--records`` records to
the frontier topic, then times ``--calls`` tick reads; CPU counts every thread of this process
(librdkafka's too). ``--repo`` runs another checkout's bus with this script:

    .venv/bin/python benchmarks/bus_metadata.py
    git worktree add /tmp/before HEAD~1 && .venv/bin/python benchmarks/bus_metadata.py --repo /tmp/before
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the checkout whose crawl_platform is measured (this one)")
parser.add_argument("--calls", type=int, default=100)
parser.add_argument("--records", type=int, default=1000)
args = parser.parse_args()
sys.path.insert(0, str(args.repo))

from crawl_platform.bus.broker import EmbeddedBroker, free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.config import Settings
from crawl_platform.pipeline.planning import read_topic


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


with EmbeddedBroker(port=free_port()) as broker:
    settings = Settings(kafka_bootstrap_servers=broker.bootstrap_servers)
    bus = KafkaBus.from_settings(settings)
    bus.ensure_topics()
    bus.publish(settings.frontier_topic, [(f"h{i % 50}.example".encode(), b"u") for i in range(args.records)])
    assert broker._process is not None
    broker_pid = broker._process.pid  # the broker's CPU is the platform's too
    read_topic(KafkaBus.from_settings(settings), settings.frontier_topic, None)  # first connections
    cpu, broker_cpu, wall = own_cpu_s(), process_cpu_s(broker_pid), time.perf_counter()
    for _ in range(args.calls):
        read_topic(KafkaBus.from_settings(settings), settings.frontier_topic, None)
    calls = args.calls / 1000
    print(f"{args.repo}: read_topic on a new bus, {args.calls} calls, per call: "
          f"this process {(own_cpu_s() - cpu) / calls:.2f} CPU ms, "
          f"the broker {(process_cpu_s(broker_pid) - broker_cpu) / calls:.2f} CPU ms, "
          f"wall {(time.perf_counter() - wall) / calls:.1f} ms")
