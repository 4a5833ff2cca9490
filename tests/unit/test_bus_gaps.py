"""Offsets without a record, on the real embedded broker: a transactional producer's commit
markers take an offset each that no consumer ever sees (as compaction's holes do on a real
cluster). Range reads must end at the range's end instead of waiting for records that never come,
and a crawl request sent in a transaction must be registered like any other."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from crawl_platform.bus.base import BatchLostError
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import decode_dead_letter, encode
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.planning import plan_intake, read_topic
from tests.conftest import all_records
from tests.unit.crawl_rows import crawl_request


@pytest.fixture
def transactional(settings) -> Iterator[Producer]:
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap_servers,
                         "transactional.id": f"tx-{uuid.uuid4().hex[:8]}", "batch.num.messages": "1",
                         "logger": logging.getLogger("tests.kafka")})
    producer.init_transactions(10)
    yield producer
    producer.flush(5)


def _commit_each(producer: Producer, topic: str, values: list[bytes]) -> None:
    """One transaction per value: each value's offset is followed by its commit marker's."""
    for value in values:
        producer.begin_transaction()
        producer.produce(topic, key=b"one-partition", value=value)
        producer.commit_transaction(10)


def _partition(bus: KafkaBus, topic: str) -> int:
    (part,) = [p for p, (_low, high) in bus.watermarks(topic).items() if high]
    return part


def test_a_range_holding_offsets_without_records_is_read_to_its_end(bus, transactional):
    _commit_each(transactional, bus.frontier_topic, [b"a", b"b", b"c"])
    part = _partition(bus, bus.frontier_topic)
    assert bus.watermarks(bus.frontier_topic)[part] == (0, 6)  # records at 0, 2, 4; markers at 1, 3, 5
    whole = bus.read_range(bus.frontier_topic, OffsetRange(part, 0, 6))
    assert [(r.offset, r.value) for r in whole] == [(0, b"a"), (2, b"b"), (4, b"c")]
    middle = bus.read_range(bus.frontier_topic, OffsetRange(part, 1, 4))
    assert [(r.offset, r.value) for r in middle] == [(2, b"b")]
    assert bus.read_range(bus.frontier_topic, OffsetRange(part, 5, 6)) == []  # a marker only


def test_a_range_past_the_end_of_the_log_is_lost_not_waited_for(bus, transactional):
    _commit_each(transactional, bus.frontier_topic, [b"a"])
    part = _partition(bus, bus.frontier_topic)
    with pytest.raises(BatchLostError, match=rf"p{part}-0-9 is no longer in the log \(broker holds 0-2\)"):
        bus.read_range(bus.frontier_topic, OffsetRange(part, 0, 9))


def test_crawl_requests_sent_in_transactions_are_registered_or_dead_lettered(bus, store, transactional):
    _commit_each(transactional, bus.seeds_topic, [encode(crawl_request("tx-1", "http://127.0.0.1:9/")),
                                                  b"{not json",
                                                  encode(crawl_request("tx-2", "http://127.0.0.1:8/"))])
    plan = plan_intake(read_topic(bus, bus.seeds_topic, None), "seeds")
    intake = SeedIntake(bus, store)
    reports = [intake.register(OffsetRange.parse(key)) for key in plan.range_keys]
    assert [crawl for report in reports for crawl in report.crawls] == ["tx-1", "tx-2"]
    assert {row[0] for row in store.query("SELECT crawl_id FROM crawls")} == {"tx-1", "tx-2"}
    (letter,) = [decode_dead_letter(r.value) for r in all_records(bus, bus.dead_letter_topic)]
    assert (letter.source_topic, letter.offset) == (bus.seeds_topic, 2)
