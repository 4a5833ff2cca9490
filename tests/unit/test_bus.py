"""The Kafka transport (crawl_platform.bus.kafka) against the real embedded broker."""

from __future__ import annotations

import pytest

from crawl_platform.bus.base import BusError
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import DeadLetter, FrontierURL, decode_dead_letter, decode_frontier_url
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_dead_letters, publish_frontier


def _all_frontier(bus: KafkaBus) -> dict[int, list[FrontierURL]]:
    """Every frontier message, by partition, in offset order."""
    out: dict[int, list[FrontierURL]] = {}
    for part, (low, high) in bus.watermarks(bus.frontier_topic).items():
        if high > low:
            records = bus.read_range(bus.frontier_topic, OffsetRange(part, low, high))
            out[part] = [decode_frontier_url(r.value) for r in records]
    return out


def test_ensure_topics_creates_then_is_idempotent(settings):
    bus = KafkaBus.from_settings(settings)
    try:
        created = bus.ensure_topics()
        assert sorted(created) == sorted([settings.seeds_topic, settings.frontier_topic,
                                          settings.dead_letter_topic])
        assert bus.ensure_topics() == []
        for topic in created:
            assert sorted(bus.watermarks(topic)) == list(range(settings.topic_partitions))
            assert all(high == 0 for _, high in bus.watermarks(topic).values())
    finally:
        bus.close()


def test_publish_frontier_keeps_each_host_in_one_partition(bus):
    hosts = [f"h{i}.example" for i in range(8)] + ["127.0.0.1:8080", "127.0.0.1:8081"]
    urls = [FrontierURL("c", f"http://{host}/page/{k}", 1) for k in range(5) for host in hosts]
    assert publish_frontier(bus, urls) == [True] * len(urls)

    by_partition = _all_frontier(bus)
    partitions_of_host: dict[str, set[int]] = {}
    for part, items in by_partition.items():
        for item in items:
            partitions_of_host.setdefault(item.url.split("/")[2], set()).add(part)
    assert set(partitions_of_host) == set(hosts)
    assert all(len(parts) == 1 for parts in partitions_of_host.values()), partitions_of_host
    assert len({p for parts in partitions_of_host.values() for p in parts}) > 1  # hosts do spread out
    # Per partition, a host's URLs keep the order they were published in.
    for items in by_partition.values():
        for host in hosts:
            pages = [i.url for i in items if i.url.split("/")[2] == host]
            assert pages == sorted(pages, key=lambda u: int(u.rsplit("/", 1)[1]))
    received = [i for items in by_partition.values() for i in items]
    assert len(received) == len(urls)
    assert set(received) == set(urls)


def test_read_range_returns_exactly_the_range_in_order(bus):
    urls = [FrontierURL("c", f"http://one.example/{k}", 0) for k in range(12)]
    assert all(publish_frontier(bus, urls))
    (part,) = [p for p, (_, high) in bus.watermarks(bus.frontier_topic).items() if high]

    records = bus.read_range(bus.frontier_topic, OffsetRange(part, 3, 8))
    assert [r.offset for r in records] == [3, 4, 5, 6, 7]
    assert all(r.partition == part and r.key == b"one.example" for r in records)
    assert [decode_frontier_url(r.value) for r in records] == urls[3:8]

    whole = bus.read_range(bus.frontier_topic, OffsetRange(part, 0, 12))
    assert [decode_frontier_url(r.value) for r in whole] == urls


def test_read_range_beyond_the_high_watermark_raises(bus):
    assert all(publish_frontier(bus, [FrontierURL("c", "http://one.example/", 0)]))
    (part,) = [p for p, (_, high) in bus.watermarks(bus.frontier_topic).items() if high]
    with pytest.raises(BusError) as caught:
        bus.read_range(bus.frontier_topic, OffsetRange(part, 0, 5))
    assert f"p{part}-0-5" in str(caught.value)
    with pytest.raises(BusError):
        bus.read_range(bus.frontier_topic, OffsetRange(part, 3, 4))


def test_dead_letters_are_decodable_records(bus):
    letters = [
        DeadLetter.for_payload("not JSON: x", bus.frontier_topic, 2, 17, b"{garbage"),
        DeadLetter.for_payload("unknown crawl 'c9'", bus.frontier_topic, 0, -1, b"http://x.example/"),
    ]
    assert publish_dead_letters(bus, letters) == [True, True]
    found = []
    for part, (low, high) in bus.watermarks(bus.dead_letter_topic).items():
        if high > low:
            found += [decode_dead_letter(r.value)
                      for r in bus.read_range(bus.dead_letter_topic, OffsetRange(part, low, high))]
    assert sorted(found, key=lambda d: d.reason) == sorted(letters, key=lambda d: d.reason)


def test_publish_returns_one_flag_per_item(bus):
    flags = bus.publish(bus.seeds_topic, [(b"k", b"one"), (None, b"two"), (b"k", b"three")])
    assert flags == [True, True, True]
    assert sum(high for _, high in bus.watermarks(bus.seeds_topic).values()) == 3


def test_watermarks_of_a_missing_topic_raise(bus):
    with pytest.raises(BusError, match="does not exist"):
        bus.watermarks(bus.frontier_topic + "-no-such-topic")


def test_topic_id_names_one_incarnation_of_a_topic(settings, bus):
    first = bus.topic_id(settings.frontier_topic)
    assert first
    assert bus.topic_id(settings.frontier_topic) == first
    assert bus.topic_id(settings.seeds_topic) != first
