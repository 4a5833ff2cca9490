"""How long one frontier-sensor tick takes with a large backlog (a tick must finish in seconds).

    .venv/bin/python benchmarks/sensor_tick.py --pending 100000
"""

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster import DagsterInstance, build_sensor_context

from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.bus.publishing import publish_frontier
from crawl_platform.config import Settings
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.kafka import frontier_sensor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=100_000)
    args = parser.parse_args()
    with EmbeddedBroker(port=0) as broker, DagsterInstance.ephemeral() as instance:
        tag = uuid.uuid4().hex[:6]
        settings = Settings(kafka_bootstrap_servers=broker.bootstrap_servers,
                            **EMBEDDED_BUS_SETTINGS, frontier_topic=f"f-{tag}",
                            seeds_topic=f"s-{tag}", dead_letter_topic=f"d-{tag}",
                            lake_path=Path(tempfile.mkdtemp()) / "lake")
        os.environ.update(settings.to_env())
        bus = KafkaBus.from_settings(settings)
        bus.ensure_topics()
        started = time.monotonic()
        urls = [FrontierURL("bench", f"http://host{i % 500}.example/p{i}", 1) for i in range(args.pending)]
        assert all(publish_frontier(bus, urls))
        produce_s = time.monotonic() - started
        cursor, ticks = None, []
        for _ in range(3):
            context = build_sensor_context(instance=instance, cursor=cursor,
                                           resources={"crawl": CrawlSettingsResource()})
            started = time.monotonic()
            result = frontier_sensor(context)
            ticks.append((time.monotonic() - started, len(result.run_requests)))
            cursor = result.cursor
    print(f"pending={args.pending} produce_s={produce_s:.1f}")
    for i, (seconds, runs) in enumerate(ticks):
        print(f"tick {i}: {seconds * 1000:.0f} ms, {runs} run requests")


if __name__ == "__main__":
    main()
