"""The Kafka transport (crawl_platform.bus.kafka) where only Kafka can fail: a broker nobody answers at.

What every bus does, the Kafka one on the real embedded broker included (topics, watermarks,
partitioning by key, range reads, acknowledgements, topic ids), is in test_bus_contract.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from crawl_platform.bus.base import BusError
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.offsets import OffsetRange


@pytest.fixture
def unreachable(store_settings) -> Iterator[KafkaBus]:
    """A Kafka bus whose bootstrap address is a loopback port nothing listens on, 1 s timeouts."""
    bus = KafkaBus(store_settings.kafka_config(), store_settings.seeds_topic, store_settings.frontier_topic,
                   store_settings.dead_letter_topic, store_settings.topic_partitions, timeout_s=1.0)
    yield bus
    bus.close()


def test_an_unreachable_broker_is_a_bus_error_naming_what_failed(unreachable, store_settings):
    with pytest.raises(BusError, match=f"^cannot reach Kafka at {store_settings.kafka_bootstrap_servers}: "):
        unreachable.ensure_topics()
    with pytest.raises(BusError, match=f"^cannot read offsets of {unreachable.frontier_topic}: "):
        unreachable.watermarks(unreachable.frontier_topic)
    with pytest.raises(BusError, match=f"^cannot read {unreachable.frontier_topic} p0-0-1: "):
        unreachable.read_range(unreachable.frontier_topic, OffsetRange(0, 0, 1))


def test_publish_to_an_unreachable_broker_confirms_nothing(unreachable):
    assert unreachable.publish(unreachable.frontier_topic, [(b"a.example", b"one"), (None, b"two")]) == [False, False]


# The admin request and the wait on its future share one timeout: whichever expires first, the
# caller gets a BusError.
def test_topic_id_of_an_unreachable_broker_is_a_bus_error(unreachable):
    with pytest.raises(BusError, match=f"^cannot describe topic {unreachable.frontier_topic}: "):
        unreachable.topic_id(unreachable.frontier_topic)
