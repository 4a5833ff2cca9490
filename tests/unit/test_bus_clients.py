"""The Kafka bus's kept metadata clients (crawl_platform.bus.kafka), on the real embedded broker.

A sensor builds a new bus at every tick and asks for a topic's watermarks and id: the process keeps
one consumer and one admin client for that, which every bus of the same configuration uses, a
forked child does not inherit, and threads share.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from crawl_platform.bus import kafka
from crawl_platform.bus.base import BusError
from crawl_platform.bus.kafka import KafkaBus


def test_every_tick_reuses_one_consumer_and_one_admin_client(settings, bus):
    topic = settings.frontier_topic
    expected = bus.watermarks(topic), bus.topic_id(topic)
    clients = kafka._metadata[0]
    for _ in range(3):  # a new bus per tick, as the sensors build them
        tick = KafkaBus.from_settings(settings)
        assert (tick.watermarks(topic), tick.topic_id(topic)) == expected
        assert tick.partition_ids(topic) == sorted(expected[0])
    assert kafka._metadata == [clients]


def test_the_kept_consumer_sees_what_is_published_after_it_was_made(settings, bus):
    topic = settings.frontier_topic
    before = bus.watermarks(topic)
    assert bus.publish(topic, [(b"kept.example", b"one"), (b"kept.example", b"two")]) == [True, True]
    after = KafkaBus.from_settings(settings).watermarks(topic)
    partition = bus.partition_of(b"kept.example", len(after))
    assert after[partition][1] == before[partition][1] + 2
    assert {p: marks for p, marks in after.items() if p != partition} == \
        {p: marks for p, marks in before.items() if p != partition}


def test_another_configuration_replaces_the_clients_and_the_first_one_comes_back(settings, bus, store_settings):
    topic = settings.frontier_topic
    expected = bus.watermarks(topic)
    first = kafka._metadata[0]
    unreachable = KafkaBus(store_settings.kafka_config(), store_settings.seeds_topic, topic,
                           store_settings.dead_letter_topic, store_settings.topic_partitions, timeout_s=1.0)
    with pytest.raises(BusError, match=r"^cannot read offsets of"):
        unreachable.watermarks(topic)
    assert kafka._metadata[0] is not first
    assert KafkaBus.from_settings(settings).watermarks(topic) == expected
    assert kafka._metadata[0].key == first.key


def test_a_forked_child_reads_with_clients_of_its_own_and_leaves_the_parents_alone(settings, bus):
    topic = settings.frontier_topic
    expected = bus.watermarks(topic)
    parents = kafka._metadata[0]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answers b"1" if it read the same watermarks with new clients
        signal.alarm(30)  # a child stuck on its parent's clients dies, and the parent reads nothing
        try:
            got = KafkaBus.from_settings(settings).watermarks(topic)
            own = kafka._metadata[0] is not parents and kafka._forked_away[-1] is parents
            os.write(write_end, b"1" if got == expected and own else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert kafka._metadata == [parents]
    assert KafkaBus.from_settings(settings).watermarks(topic) == expected


def test_threads_ticking_at_once_share_the_clients(settings, bus):
    topic = settings.frontier_topic
    expected = bus.watermarks(topic)
    answers: list[object] = []

    def tick() -> None:
        tick_bus = KafkaBus.from_settings(settings)
        answers.extend([tick_bus.watermarks(topic), tick_bus.topic_id(topic)])

    threads = [threading.Thread(target=tick) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers[0::2] == [expected] * 8
    assert len(set(answers[1::2])) == 1
    assert len(kafka._metadata) == 1
