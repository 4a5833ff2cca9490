"""Kafka transport of the crawl bus (a :class:`crawl_platform.bus.base.Bus`): topics, publishing, range reads.

Moves bytes only; :mod:`crawl_platform.bus.messages` turns them into typed messages and
:mod:`crawl_platform.bus.publishing` picks each message's topic and key. Reads use
manual partition assignment with offsets kept by the caller (the Dagster sensor cursor and the
partition key of a run), never consumer groups: group joins are slow on the embedded broker and
the broker is not the system of record (DuckDB is), so the platform must not depend on
broker-side offsets.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from crawl_platform.bus.base import BatchLostError, BusError, Record
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.config import Settings

_KAFKA_LOG = logging.getLogger("crawl_platform.kafka")


@dataclass
class _MetadataClients:
    """A consumer that is never assigned (topic metadata and watermarks only) and an admin client,
    for one client configuration in one process; used under ``lock`` (the sensors tick in threads)."""

    key: str
    consumer: Consumer
    admin: AdminClient
    lock: threading.Lock = field(default_factory=threading.Lock)


_METADATA_LOCK = threading.Lock()
_metadata: list[_MetadataClients] = []  # this process's clients: one configuration at a time
_forked_away: list[_MetadataClients] = []  # a parent's, inherited by a fork: never used, never destroyed


def _forget_the_parents_clients() -> None:
    """In a forked child: librdkafka's threads stayed in the parent, so its clients are kept out of
    reach (destroying them would wait for those threads), and a lock another thread held at the
    fork is replaced."""
    global _METADATA_LOCK  # noqa: PLW0603 - the module's one lock, made anew in a forked child
    _METADATA_LOCK = threading.Lock()
    _forked_away.extend(_metadata)
    _metadata.clear()


os.register_at_fork(after_in_child=_forget_the_parents_clients)


class KafkaBus:
    """Topics of one crawl deployment on one Kafka cluster (the real :class:`~crawl_platform.bus.base.Bus`)."""

    def __init__(
        self,
        client_config: dict[str, str],
        seeds_topic: str,
        frontier_topic: str,
        dead_letter_topic: str,
        partitions: int,
        timeout_s: float = 10.0,
        producer_config: dict[str, str] | None = None,
        pages_topic: str = "crawl.pages",
        control_topic: str = "crawl.control",
        exact_log_ends: bool = False,
        compression: str = "lz4",
    ) -> None:
        # librdkafka logs through Python logging instead of writing to stderr itself.
        self._config: dict[str, Any] = {**client_config, "logger": _KAFKA_LOG}
        self._producer_config = dict(producer_config or {})
        self.compression = compression
        self.seeds_topic = seeds_topic
        self.frontier_topic = frontier_topic
        self.dead_letter_topic = dead_letter_topic
        self.pages_topic = pages_topic
        self.control_topic = control_topic
        self.partitions = partitions
        self.timeout_s = timeout_s
        # Watermarks from the logs' true ends (see log_ends): for a broker whose high watermark
        # stops short of a batched log's end (Tansu 0.6, KAFKA_EXACT_LOG_ENDS).
        self.exact_log_ends = exact_log_ends
        self._producer: Producer | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaBus:
        return cls(
            settings.kafka_config(),
            settings.seeds_topic,
            settings.frontier_topic,
            settings.dead_letter_topic,
            settings.topic_partitions,
            producer_config=settings.kafka_producer_config,
            pages_topic=settings.pages_topic,
            control_topic=settings.control_topic,
            exact_log_ends=settings.kafka_exact_log_ends,
            compression=settings.kafka_compression,
        )

    # --- topics --------------------------------------------------------------------------------
    def ensure_topics(self) -> list[str]:
        """Create any missing topic; returns the names created (empty when all existed)."""
        admin = AdminClient(self._config)
        try:
            existing = set(admin.list_topics(timeout=self.timeout_s).topics)
        except KafkaException as err:
            raise BusError(f"cannot reach Kafka at {self._config['bootstrap.servers']}: {err}") from None
        wanted = [self.seeds_topic, self.frontier_topic, self.dead_letter_topic, self.pages_topic, self.control_topic]
        missing = [NewTopic(t, num_partitions=self.partitions, replication_factor=1)
                   for t in wanted if t not in existing]
        if not missing:
            return []
        created = []
        for name, future in admin.create_topics(missing, request_timeout=self.timeout_s).items():
            try:
                future.result(self.timeout_s)
                created.append(name)
            except concurrent.futures.TimeoutError:
                raise BusError(f"cannot create topic {name}: timed out after {self.timeout_s:.0f}s") from None
            except KafkaException as err:
                if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise BusError(f"cannot create topic {name}: {err}") from None
        return created

    def topic_id(self, topic: str) -> str | None:
        """The topic's unique id (KIP-516): it changes when the topic is deleted and created again,
        e.g. by a restarted memory-only broker, even if new messages refill the old offsets.
        None when the broker does not report one."""
        clients = self._metadata_clients()
        try:
            with clients.lock:
                futures = clients.admin.describe_topics(TopicCollection([topic]), request_timeout=self.timeout_s)
                topic_id = futures[topic].result(self.timeout_s).topic_id
        except (KafkaException, concurrent.futures.TimeoutError) as err:  # whichever timeout expires first
            raise BusError(f"cannot describe topic {topic}: {err or 'timed out'}") from None
        text = str(topic_id) if topic_id is not None else ""
        return text if text.strip("A=") else None  # an all-zero id means "not supported"

    def watermarks(self, topic: str, skip: Collection[int] = ()) -> dict[int, tuple[int, int]]:
        """Low and high offsets of every partition of ``topic`` but those in ``skip``; with
        ``exact_log_ends`` the high ones are where the logs really end (:meth:`log_ends`). Each
        partition is two ListOffsets requests, which the embedded broker (Tansu 0.6) answers by
        walking the partition's in-memory log batch by batch: the cost grows with the log, and
        far faster when its records came one per batch than in batches (measured by
        ``benchmarks/broker_offsets.py``)."""
        marks = self._broker_watermarks(topic, skip)
        return self._true_ends(topic, marks) if self.exact_log_ends else marks

    def _broker_watermarks(self, topic: str, skip: Collection[int] = ()) -> dict[int, tuple[int, int]]:
        clients = self._metadata_clients()
        try:
            with clients.lock:
                return {
                    p: clients.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout_s)
                    for p in self._partition_ids(clients.consumer, topic) if p not in skip
                }
        except KafkaException as err:
            raise BusError(f"cannot read offsets of {topic}: {err}") from None

    def partition_ids(self, topic: str) -> list[int]:
        clients = self._metadata_clients()
        try:
            with clients.lock:
                return self._partition_ids(clients.consumer, topic)
        except KafkaException as err:
            raise BusError(f"cannot read the partitions of {topic}: {err}") from None

    def _partition_ids(self, consumer: Consumer, topic: str) -> list[int]:
        meta = consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise BusError(f"topic {topic} does not exist on the broker")
        return sorted(meta.partitions)

    def log_ends(self, topic: str) -> dict[int, tuple[int, int]]:
        """Low offset and the offset after the last record of every partition, found by reading
        the log's tail to its end rather than trusted from the high watermark: the embedded broker
        (Tansu 0.6) reports the base offset of the last record batch plus one, so the tail of a
        batch from a batching producer lies past its high watermark. One short read per call."""
        return self._true_ends(topic, self._broker_watermarks(topic))

    def _true_ends(self, topic: str, marks: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        tails = {p: high - 1 for p, (low, high) in marks.items() if high > low}
        if not tails:
            return marks
        consumer = self._consumer(fetch_wait_ms=20)  # reads to the log's end
        try:
            consumer.assign([TopicPartition(topic, p, offset) for p, offset in tails.items()])
            ends = self._read(consumer, topic, dict(tails), dict.fromkeys(tails), [])
        except KafkaException as err:
            raise BusError(f"cannot read the end of {topic}: {err}") from None
        finally:
            consumer.close()
        return {p: (low, max(high, ends.get(p, high))) for p, (low, high) in marks.items()}

    # --- reading ---------------------------------------------------------------------------------
    def read_range(self, topic: str, offsets: OffsetRange) -> list[Record]:
        """Every record in ``offsets``, which may hold gaps (offsets of transaction markers, or of
        records compaction removed): the read ends at the first record at or past the range's end,
        or at the end of the log. Raises :class:`BatchLostError` if the log no longer reaches the
        range (the broker lost data)."""
        part = offsets.partition
        consumer = self._consumer()
        records: list[Record] = []
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=self.timeout_s)
            if high < offsets.end:  # a lost log, or a high watermark that misses a batch's tail
                high = self._true_ends(topic, {part: (low, high)})[part][1]  # this partition's only
            if low > offsets.start or high < offsets.end:
                raise BatchLostError(
                    f"{topic} {offsets.key} is no longer in the log (broker holds {low}-{high}); "
                    "the broker lost data: its URLs are re-published from the store"
                )
            consumer.assign([TopicPartition(topic, part, offsets.start)])
            log_end = self._read(consumer, topic, {part: offsets.start}, {part: offsets.end}, records)[part]
        except KafkaException as err:
            raise BusError(f"cannot read {topic} {offsets.key}: {err}") from None
        finally:
            consumer.close()
        if log_end < offsets.end:
            raise BatchLostError(f"{topic} {offsets.key} is no longer in the log (it ends at {log_end}); "
                                 "the broker lost data: its URLs are re-published from the store")
        return records

    def _read(self, consumer: Consumer, topic: str, position: dict[int, int], until: dict[int, int | None],
              records: list[Record]) -> dict[int, int]:
        """Consume the assigned partitions from ``position`` into ``records`` until each one meets a
        record at or past its ``until`` offset (that record is not kept) or the end of its log
        (``until`` None: always the end). Returns where each partition stopped: its ``until``, or
        the log's end offset. Offsets may jump (gaps). Raises :class:`BusError` after
        ``timeout_s`` without a message."""
        stopped: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout_s
        while len(stopped) < len(position):
            wanted = 0  # messages still expected: a call returns as soon as that many arrived
            for p, pos in position.items():
                end = until[p]
                wanted += 0 if p in stopped else (end - pos if end is not None else 1)
            batch = consumer.consume(max(1, min(wanted, 1000)), timeout=0.5)
            if not batch and time.monotonic() > deadline:
                raise BusError(f"timed out reading {topic} at offsets {position}")
            for msg in batch:
                part, offset, error = msg.partition() or 0, msg.offset() or 0, msg.error()
                if part in stopped:
                    continue
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise BusError(f"error reading {topic}: {error}")
                    stopped[part] = offset  # the end of the log
                    continue
                end = until[part]
                if end is not None and offset >= end:
                    stopped[part] = end
                    continue
                if offset >= position[part]:
                    records.append(Record(part, offset, msg.key(), msg.value()))
                    position[part] = offset + 1
                    if end is not None and offset + 1 == end:  # the range's last offset: done
                        stopped[part] = end
            if batch:
                deadline = time.monotonic() + self.timeout_s
        return stopped

    # --- publishing ------------------------------------------------------------------------------
    def publish(self, topic: str, items: Iterable[tuple[bytes | None, bytes]]) -> list[bool]:
        """Produce ``(key, value)`` pairs and wait for the broker's acks.

        Returns one flag per item: True once the broker confirmed it. The caller keeps the
        unconfirmed ones marked as such and publishes them again on its next pass.
        """
        producer = self._get_producer()
        delivered: list[bool] = []

        def on_delivery(index: int) -> Callable[[KafkaError | None, Message], None]:
            def callback(err: KafkaError | None, _msg: Message) -> None:
                delivered[index] = err is None
            return callback

        for key, value in items:
            delivered.append(False)
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery(len(delivered) - 1))
                    break
                except BufferError:  # local queue full: let deliveries drain, then go on
                    producer.poll(0.1)
        remaining = producer.flush(self.timeout_s)
        if remaining:
            producer.purge()
            producer.flush(1.0)
        return delivered

    def partition_of(self, key: bytes, partitions: int) -> int:
        """Where the producer's ``murmur2_random`` partitioner puts ``key`` (Java's default)."""
        return (murmur2(key) & 0x7FFFFFFF) % partitions

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None

    # --- clients -----------------------------------------------------------------------------
    def _metadata_clients(self) -> _MetadataClients:
        """This process's clients for topic metadata, watermarks and topic ids, made at the first
        call and kept. A sensor asks for them at every tick, and a new consumer and admin client
        each time cost the tick several times the CPU (its own and the embedded broker's) and the
        wall time of kept ones (measured by ``benchmarks/bus_metadata.py``). One configuration at a
        time: another one replaces them (the last user's reference ends the old ones). A forked
        child makes its own (:func:`_forget_the_parents_clients`)."""
        key = repr(sorted((k, v) for k, v in self._config.items() if k != "logger"))
        with _METADATA_LOCK:
            if not _metadata or _metadata[0].key != key:
                _metadata[:] = [_MetadataClients(key, self._consumer(), AdminClient(self._config))]
            return _metadata[0]

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({
                **self._config,
                "linger.ms": "5",
                "enable.idempotence": "false",
                "acks": "all",
                # Same partition for the same host key in every client (Java-compatible hash).
                "partitioner": "murmur2_random",
                "message.timeout.ms": str(int(self.timeout_s * 1000)),
                # Whole batches compressed: a broker keeps and a consumer reads a fraction of the
                # bytes, and the embedded broker, which keeps every message in memory, grows by that
                # fraction (measured by benchmarks/broker_offsets.py --compression).
                "compression.type": self.compression,
                **self._producer_config,
            })
        return self._producer

    def _consumer(self, fetch_wait_ms: int = 500) -> Consumer:
        """A reader by manual assignment. ``fetch_wait_ms`` is how long the broker may hold a fetch
        that found too little: 20 for a read that goes to the log's end (answered after that wait
        there), librdkafka's 500 for a range read. On the embedded broker (Tansu 0.6), fetches with
        the short wait return a few records each, so a range read deep in a log takes many times
        longer with it (measured by ``benchmarks/kafka_reads.py``)."""
        return Consumer({
            **self._config,
            # Required by librdkafka, never joined: reads use manual assignment.
            "group.id": f"crawl-platform-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "true",
            "fetch.wait.max.ms": str(fetch_wait_ms),
        })


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of a key (``Utils.murmur2`` in the Java client, ``rd_murmur2`` in
    librdkafka): confluent-kafka does not expose the partitioner, and a reader of the store must
    know which frontier partition a host's key went to."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length - length % 4
    extra = length % 4
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h
