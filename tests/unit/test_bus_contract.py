"""The Bus contract (crawl_platform.bus.base) and the publishing helpers, run against both buses.

Every test runs twice: on :class:`KafkaBus` over the session's embedded broker and on
:class:`InMemoryBus`. The engine relies on exactly these properties, so the in-memory bus that
unit tests of other logic use must behave like the real one. Kafka-only behaviour is in test_bus.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from crawl_platform.bus.base import BatchLostError, Bus, BusError, Record
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.memory import InMemoryBus
from crawl_platform.bus.messages import (
    CrawlRequest,
    DeadLetter,
    FrontierURL,
    decode_crawl_request,
    decode_dead_letter,
    decode_frontier_url,
)
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_crawl_request, publish_dead_letters, publish_frontier

BUSES = ["kafka", "memory"]
HOSTS = [f"h{i}.example" for i in range(8)] + ["127.0.0.1:8080", "127.0.0.1:8081"]


@pytest.fixture(params=BUSES)
def bare_bus(request: pytest.FixtureRequest) -> Iterator[Bus]:
    """A bus whose topics do not exist yet (the broker starts only for the Kafka case)."""
    if request.param == "kafka":
        bus: Bus = KafkaBus.from_settings(request.getfixturevalue("settings"))
    else:
        bus = InMemoryBus("seeds-t", "frontier-t", "dead-t", partitions=4, pages_topic="pages-t")
    yield bus
    bus.close()


@pytest.fixture(params=BUSES)
def any_bus(request: pytest.FixtureRequest) -> Bus:
    """A bus with its topics created: conftest's ``bus`` on the real broker, or an in-memory one."""
    if request.param == "kafka":
        return request.getfixturevalue("bus")
    memory = InMemoryBus("seeds-t", "frontier-t", "dead-t", partitions=4)
    memory.ensure_topics()
    return memory


def _records(bus: Bus, topic: str) -> dict[int, list[Record]]:
    """Every record of ``topic``, by partition, in offset order."""
    return {part: bus.read_range(topic, OffsetRange(part, low, high))
            for part, (low, high) in bus.watermarks(topic).items() if high > low}


def _recreate_topics(bus: Bus, request: pytest.FixtureRequest) -> None:
    """Make every topic of ``bus`` anew, empty, as a restarted memory-only broker does."""
    if isinstance(bus, InMemoryBus):
        bus.restart_empty()
    else:
        admin = AdminClient(request.getfixturevalue("settings").kafka_config())
        topics = [bus.seeds_topic, bus.frontier_topic, bus.dead_letter_topic, bus.pages_topic, bus.control_topic]
        try:
            for future in admin.delete_topics(topics, request_timeout=10).values():
                future.result(10)
        except KafkaException as err:
            pytest.skip(f"the embedded broker cannot delete topics: {err}")
    bus.ensure_topics()


def test_ensure_topics_creates_each_topic_once(bare_bus):
    topics = [bare_bus.seeds_topic, bare_bus.frontier_topic, bare_bus.dead_letter_topic, bare_bus.pages_topic,
              bare_bus.control_topic]
    assert sorted(bare_bus.ensure_topics()) == sorted(topics)
    assert bare_bus.ensure_topics() == []
    for topic in topics:
        assert bare_bus.watermarks(topic) == dict.fromkeys(range(bare_bus.partitions), (0, 0))


def test_watermarks_count_what_each_partition_holds(any_bus):
    assert any_bus.publish(any_bus.seeds_topic, [(b"k1", b"a"), (b"k1", b"b"), (b"k2", b"c")]) == [True] * 3
    marks = any_bus.watermarks(any_bus.seeds_topic)
    assert sorted(marks) == list(range(any_bus.partitions))
    assert all(low == 0 for low, _ in marks.values())
    assert sum(high for _, high in marks.values()) == 3
    assert {part: len(records) for part, records in _records(any_bus, any_bus.seeds_topic).items()} == {
        part: high for part, (_, high) in marks.items() if high}


def test_watermarks_leave_out_the_skipped_partitions_and_partition_ids_list_them_all(any_bus):
    assert any_bus.publish(any_bus.seeds_topic, [(b"k1", b"a"), (b"k1", b"b"), (b"k2", b"c")]) == [True] * 3
    every = any_bus.watermarks(any_bus.seeds_topic)
    busiest = max(every, key=lambda part: every[part][1])
    rest = any_bus.watermarks(any_bus.seeds_topic, skip={busiest})
    assert busiest not in rest
    assert rest == {part: marks for part, marks in every.items() if part != busiest}
    assert any_bus.partition_ids(any_bus.seeds_topic) == list(range(any_bus.partitions))
    with pytest.raises(BusError, match="does not exist"):
        any_bus.partition_ids(any_bus.frontier_topic + "-no-such-topic")


def test_log_ends_are_where_each_partition_ends(any_bus):
    assert any_bus.publish(any_bus.seeds_topic, [(b"k1", b"a"), (b"k1", b"b"), (b"k2", b"c")]) == [True] * 3
    ends = any_bus.log_ends(any_bus.seeds_topic)
    assert ends == any_bus.watermarks(any_bus.seeds_topic)  # one record per batch: the watermarks are right
    assert {part: high for part, (_, high) in ends.items() if high} == {
        part: records[-1].offset + 1 for part, records in _records(any_bus, any_bus.seeds_topic).items()}


def test_watermarks_of_a_missing_topic_raise(any_bus):
    with pytest.raises(BusError, match="does not exist"):
        any_bus.watermarks(any_bus.frontier_topic + "-no-such-topic")


def test_equal_keys_land_in_one_partition_in_publishing_order(any_bus):
    items = [(host.encode(), f"{host}/{k}".encode()) for k in range(5) for host in HOSTS]
    assert any_bus.publish(any_bus.frontier_topic, items) == [True] * len(items)

    placed: dict[bytes | None, list[tuple[int, bytes | None]]] = {}  # key -> (partition, value) in offset order
    for part, records in _records(any_bus, any_bus.frontier_topic).items():
        for record in records:
            placed.setdefault(record.key, []).append((part, record.value))
    assert set(placed) == {host.encode() for host in HOSTS}
    for host in HOSTS:
        assert len({part for part, _ in placed[host.encode()]}) == 1, placed[host.encode()]
        assert [value for _, value in placed[host.encode()]] == [f"{host}/{k}".encode() for k in range(5)]
    assert len({entries[0][0] for entries in placed.values()}) > 1  # different keys do spread out


def test_read_range_returns_exactly_the_range(any_bus):
    values = [f"v{k}".encode() for k in range(12)]
    assert all(any_bus.publish(any_bus.frontier_topic, [(b"one.example", v) for v in values]))
    (part,) = [p for p, (_, high) in any_bus.watermarks(any_bus.frontier_topic).items() if high]

    records = any_bus.read_range(any_bus.frontier_topic, OffsetRange(part, 3, 8))
    assert records == [Record(part, offset, b"one.example", values[offset]) for offset in range(3, 8)]
    whole = any_bus.read_range(any_bus.frontier_topic, OffsetRange(part, 0, 12))
    assert [r.value for r in whole] == values


def test_read_range_beyond_the_log_raises_batch_lost(any_bus):
    assert all(any_bus.publish(any_bus.frontier_topic, [(b"one.example", b"only")]))
    marks = any_bus.watermarks(any_bus.frontier_topic)
    (holding,) = [p for p, (_, high) in marks.items() if high]
    empty = next(p for p, (_, high) in marks.items() if not high)
    for offsets in (OffsetRange(holding, 0, 5), OffsetRange(holding, 3, 4), OffsetRange(empty, 0, 1)):
        with pytest.raises(BatchLostError) as caught:
            any_bus.read_range(any_bus.frontier_topic, offsets)
        assert offsets.key in str(caught.value)


def test_publish_returns_one_true_per_item(any_bus):
    assert any_bus.publish(any_bus.seeds_topic, [(b"k", b"one"), (None, b"two"), (b"k", b"three")]) == [True] * 3
    assert any_bus.publish(any_bus.seeds_topic, []) == []
    assert sum(high for _, high in any_bus.watermarks(any_bus.seeds_topic).values()) == 3


def test_topic_id_names_one_incarnation_of_a_topic(any_bus, request):
    first = any_bus.topic_id(any_bus.frontier_topic)
    assert first
    assert any_bus.topic_id(any_bus.frontier_topic) == first
    assert any_bus.topic_id(any_bus.seeds_topic) not in (None, first)

    _recreate_topics(any_bus, request)
    assert any_bus.topic_id(any_bus.frontier_topic) not in (None, first)
    assert all(high == 0 for _, high in any_bus.watermarks(any_bus.frontier_topic).values())


def test_publish_frontier_keys_each_url_by_its_host(any_bus):
    urls = [FrontierURL("c", f"http://{host}/page/{k}", 1) for k in range(3) for host in HOSTS]
    assert publish_frontier(any_bus, urls) == [True] * len(urls)

    records = [r for part in _records(any_bus, any_bus.frontier_topic).values() for r in part]
    assert len(records) == len(urls)
    assert {(r.key, decode_frontier_url(r.value)) for r in records} == {(u.url.split("/")[2].encode(), u) for u in urls}


def test_publish_crawl_request_keys_it_by_crawl_id_and_dead_letters_have_no_key(any_bus):
    request = CrawlRequest("crawl-7", ("http://a.example/",), 10, 1, "host", 1_700_000_000.0)
    assert publish_crawl_request(any_bus, request) is True
    letters = [DeadLetter.for_payload("not JSON: x", any_bus.frontier_topic, 2, 17, b"{garbage"),
               DeadLetter.for_payload("unknown crawl 'c9'", any_bus.frontier_topic, 0, -1, b"http://x.example/")]
    assert publish_dead_letters(any_bus, letters) == [True, True]

    (seed,) = [r for part in _records(any_bus, any_bus.seeds_topic).values() for r in part]
    assert (seed.key, decode_crawl_request(seed.value)) == (b"crawl-7", request)
    dead = [r for part in _records(any_bus, any_bus.dead_letter_topic).values() for r in part]
    assert {r.key for r in dead} == {None}
    assert sorted((decode_dead_letter(r.value) for r in dead), key=lambda d: d.reason) == letters
