"""An in-memory :class:`crawl_platform.bus.base.Bus`, for unit tests of logic that is not about Kafka.

It keeps the contract the engine relies on: topics with a fixed number of partitions, equal keys
in one partition, offsets from 0, watermarks, range reads that fail with
:class:`~crawl_platform.bus.base.BatchLostError` once the log is gone, and a topic id that
changes when a topic is created anew. :meth:`InMemoryBus.restart_empty` plays a memory-only
broker that restarted. Tests of Kafka behaviour itself use the real broker.
"""

from __future__ import annotations

import threading
import uuid
import zlib
from collections.abc import Collection, Iterable

from crawl_platform.bus.base import BatchLostError, BusError, Record
from crawl_platform.bus.offsets import OffsetRange


class InMemoryBus:
    """Topics of one deployment in this process's memory."""

    def __init__(self, seeds_topic: str = "crawl.seeds", frontier_topic: str = "crawl.frontier",
                 dead_letter_topic: str = "crawl.dead-letter", partitions: int = 4,
                 pages_topic: str = "crawl.pages", control_topic: str = "crawl.control") -> None:
        self.seeds_topic = seeds_topic
        self.pages_topic = pages_topic
        self.control_topic = control_topic
        self.frontier_topic = frontier_topic
        self.dead_letter_topic = dead_letter_topic
        self.partitions = partitions
        self._logs: dict[str, list[list[tuple[bytes | None, bytes]]]] = {}
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()
        self._round_robin = 0

    def ensure_topics(self) -> list[str]:
        created = []
        with self._lock:
            for topic in (self.seeds_topic, self.frontier_topic, self.dead_letter_topic, self.pages_topic,
                          self.control_topic):
                if topic not in self._logs:
                    self._logs[topic] = [[] for _ in range(self.partitions)]
                    self._ids[topic] = uuid.uuid4().hex
                    created.append(topic)
        return created

    def topic_id(self, topic: str) -> str | None:
        with self._lock:
            if topic not in self._ids:
                raise BusError(f"topic {topic} does not exist on the broker")
            return self._ids[topic]

    def watermarks(self, topic: str, skip: Collection[int] = ()) -> dict[int, tuple[int, int]]:
        with self._lock:
            log = self._logs.get(topic)
            if log is None:
                raise BusError(f"topic {topic} does not exist on the broker")
            return {p: (0, len(records)) for p, records in enumerate(log) if p not in skip}

    def partition_ids(self, topic: str) -> list[int]:
        with self._lock:
            log = self._logs.get(topic)
            if log is None:
                raise BusError(f"topic {topic} does not exist on the broker")
            return list(range(len(log)))

    def log_ends(self, topic: str) -> dict[int, tuple[int, int]]:
        return self.watermarks(topic)  # this log's high watermark is always right

    def read_range(self, topic: str, offsets: OffsetRange) -> list[Record]:
        with self._lock:
            log = self._logs.get(topic)
            records = log[offsets.partition] if log is not None and offsets.partition < len(log) else []
            if offsets.end > len(records):
                raise BatchLostError(f"{topic} {offsets.key} is no longer in the log (broker holds "
                                     f"0-{len(records)}); its URLs are re-published from the store")
            return [Record(offsets.partition, o, *records[o]) for o in range(offsets.start, offsets.end)]

    def publish(self, topic: str, items: Iterable[tuple[bytes | None, bytes]]) -> list[bool]:
        flags = []
        with self._lock:
            log = self._logs.get(topic)
            if log is None:
                raise BusError(f"topic {topic} does not exist on the broker")
            for key, value in items:
                if key is None:
                    self._round_robin += 1
                    partition = self._round_robin % len(log)
                else:
                    partition = self.partition_of(key, len(log))
                log[partition].append((key, value))
                flags.append(True)
        return flags

    def partition_of(self, key: bytes, partitions: int) -> int:
        return zlib.crc32(key) % partitions

    def messages(self, topic: str) -> list[bytes]:
        """Every value on ``topic``, partition by partition (for assertions)."""
        with self._lock:
            return [value for records in self._logs.get(topic, []) for _key, value in records]

    def restart_empty(self) -> None:
        """Forget every topic, as a memory-only broker does when it restarts."""
        with self._lock:
            self._logs.clear()
            self._ids.clear()

    def close(self) -> None:
        return None
