"""Kafka transport of the crawl bus: topics, host-keyed publishing, offset-range reads.

Moves bytes only; :mod:`crawl_platform.messages` turns them into typed messages. Reads use
manual partition assignment with offsets kept by the caller (the Dagster sensor cursor and the
partition key of a run), never consumer groups: group joins are slow on the embedded broker and
the broker is not the system of record (DuckDB is), so the platform must not depend on
broker-side offsets.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from crawl_platform.config import Settings
from crawl_platform.messages import DeadLetter, FrontierURL, encode
from crawl_platform.urls import host_of

_KAFKA_LOG = logging.getLogger("crawl_platform.kafka")


class BusError(RuntimeError):
    """The broker could not be reached or refused an operation; ``str(err)`` says which."""


class BatchLostError(BusError):
    """The broker no longer holds a batch's offsets (it lost its log). Permanent: the batch's URLs
    are still in the store and get re-published, so the batch itself is simply skipped."""


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: the unit a crawl batch is cut into."""

    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.partition < 0 or self.start < 0 or self.end <= self.start:
            raise ValueError(f"invalid offset range {self}")

    @property
    def key(self) -> str:
        return f"p{self.partition}-{self.start}-{self.end}"

    @classmethod
    def parse(cls, key: str) -> OffsetRange:
        """Inverse of :attr:`key` (raises ValueError on anything else)."""
        try:
            part, start, end = key.split("-")
            if not part.startswith("p"):
                raise ValueError(key)
            return cls(int(part[1:]), int(start), int(end))
        except ValueError:
            raise ValueError(f"not an offset range key: {key!r}") from None


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class KafkaBus:
    """Topics of one crawl deployment on one Kafka cluster."""

    def __init__(
        self,
        client_config: dict[str, str],
        seeds_topic: str,
        frontier_topic: str,
        dead_letter_topic: str,
        partitions: int,
        timeout_s: float = 10.0,
        producer_config: dict[str, str] | None = None,
    ) -> None:
        # librdkafka logs through Python logging instead of writing to stderr itself.
        self._config: dict[str, Any] = {**client_config, "logger": _KAFKA_LOG}
        self._producer_config = dict(producer_config or {})
        self.seeds_topic = seeds_topic
        self.frontier_topic = frontier_topic
        self.dead_letter_topic = dead_letter_topic
        self.partitions = partitions
        self.timeout_s = timeout_s
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
        )

    # --- topics --------------------------------------------------------------------------------
    def ensure_topics(self) -> list[str]:
        """Create any missing topic; returns the names created (empty when all existed)."""
        admin = AdminClient(self._config)
        try:
            existing = set(admin.list_topics(timeout=self.timeout_s).topics)
        except KafkaException as err:
            raise BusError(f"cannot reach Kafka at {self._config['bootstrap.servers']}: {err}") from None
        wanted = [self.seeds_topic, self.frontier_topic, self.dead_letter_topic]
        missing = [NewTopic(t, num_partitions=self.partitions, replication_factor=1)
                   for t in wanted if t not in existing]
        if not missing:
            return []
        created = []
        for name, future in admin.create_topics(missing, request_timeout=self.timeout_s).items():
            try:
                future.result(self.timeout_s)
                created.append(name)
            except KafkaException as err:
                if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise BusError(f"cannot create topic {name}: {err}") from None
        return created

    def topic_id(self, topic: str) -> str | None:
        """The topic's unique id (KIP-516): it changes when the topic is deleted and created again,
        e.g. by a restarted memory-only broker, even if new messages refill the old offsets.
        None when the broker does not report one."""
        admin = AdminClient(self._config)
        try:
            futures = admin.describe_topics(TopicCollection([topic]), request_timeout=self.timeout_s)
            topic_id = futures[topic].result(self.timeout_s).topic_id
        except KafkaException as err:
            raise BusError(f"cannot describe topic {topic}: {err}") from None
        text = str(topic_id) if topic_id is not None else ""
        return text if text.strip("A=") else None  # an all-zero id means "not supported"

    def watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """Low and high offsets of every partition of ``topic``."""
        consumer = self._consumer()
        try:
            meta = consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise BusError(f"topic {topic} does not exist on the broker")
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout_s)
                for p in sorted(meta.partitions)
            }
        except KafkaException as err:
            raise BusError(f"cannot read offsets of {topic}: {err}") from None
        finally:
            consumer.close()

    # --- reading ---------------------------------------------------------------------------------
    def read_range(self, topic: str, offsets: OffsetRange) -> list[Record]:
        """Every record in ``offsets``; raises :class:`BusError` if the log no longer holds them all."""
        consumer = self._consumer()
        records: list[Record] = []
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, offsets.partition), timeout=self.timeout_s
            )
            if low > offsets.start or high < offsets.end:
                raise BatchLostError(
                    f"{topic} {offsets.key} is no longer in the log (broker holds {low}-{high}); "
                    "the broker lost data: its URLs are re-published from the store"
                )
            consumer.assign([TopicPartition(topic, offsets.partition, offsets.start)])
            wanted = offsets.end - offsets.start
            while len(records) < wanted:
                batch = consumer.consume(min(wanted - len(records), 1000), timeout=self.timeout_s)
                if not batch:
                    raise BusError(f"timed out reading {topic} {offsets.key} at {len(records)}/{wanted}")
                for msg in batch:
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise BusError(f"error reading {topic}: {error}")
                    offset = msg.offset() or 0
                    if offset >= offsets.end:
                        break
                    records.append(Record(offsets.partition, offset, msg.key(), msg.value()))
        except KafkaException as err:
            raise BusError(f"cannot read {topic} {offsets.key}: {err}") from None
        finally:
            consumer.close()
        return records

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

    def publish_frontier(self, urls: list[FrontierURL]) -> list[bool]:
        """Publish URLs keyed by host, so one frontier partition owns a host's politeness."""
        return self.publish(
            self.frontier_topic, ((host_of(u.url).encode(), encode(u)) for u in urls)
        )

    def dead_letter(self, letters: list[DeadLetter]) -> list[bool]:
        return self.publish(self.dead_letter_topic, ((None, encode(d)) for d in letters))

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None

    # --- clients -----------------------------------------------------------------------------
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
                **self._producer_config,
            })
        return self._producer

    def _consumer(self) -> Consumer:
        return Consumer({
            **self._config,
            # Required by librdkafka, never joined: reads use manual assignment.
            "group.id": f"crawl-platform-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "true",
        })
