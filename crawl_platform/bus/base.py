"""The bus interface: what the engine needs from a message transport, and nothing more.

A bus moves bytes on named topics: it creates them, reports each partition's watermarks, reads
an offset range and publishes ``(key, value)`` pairs with a per-message acknowledgement. It knows
no message type: :mod:`crawl_platform.bus.messages` encodes and decodes, and
:mod:`crawl_platform.bus.publishing` puts typed messages on the right topic with the right key.
Two implementations: :class:`crawl_platform.bus.kafka.KafkaBus` (the real one) and
:class:`crawl_platform.bus.memory.InMemoryBus` (for unit tests of logic that is not about Kafka).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from crawl_platform.bus.offsets import OffsetRange


class BusError(RuntimeError):
    """The broker could not be reached or refused an operation; ``str(err)`` says which."""


class BatchLostError(BusError):
    """The broker no longer holds a batch's offsets (it lost its log). Permanent: the batch's URLs
    are still in the store and get re-published, so the batch itself is simply skipped."""


@dataclass(frozen=True)
class Record:
    """One message read back from a topic partition."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class Bus(Protocol):
    """Topics of one crawl deployment. Every method raises :class:`BusError` when the broker
    cannot be reached; the caller skips its turn (sensors) or fails the step (runs) and retries."""

    seeds_topic: str
    frontier_topic: str
    dead_letter_topic: str
    control_topic: str
    partitions: int
    pages_topic: str  # page events for subscribers outside the platform

    def ensure_topics(self) -> list[str]:
        """Create any missing topic; returns the names created (empty when all existed)."""
        ...

    def topic_id(self, topic: str) -> str | None:
        """The topic's unique id, which changes when the topic is created anew (a restarted
        memory-only broker); None when the broker reports none. The caller compares it with the
        id its cursor was written for and starts over from the new log when they differ."""
        ...

    def watermarks(self, topic: str, skip: Collection[int] = ()) -> dict[int, tuple[int, int]]:
        """Low and high offset of every partition but those in ``skip``, which are not asked for
        and are absent from the result; raises :class:`BusError` if the topic is missing (the caller
        then calls :meth:`ensure_topics`)."""
        ...

    def partition_ids(self, topic: str) -> list[int]:
        """The topic's partition numbers, from its metadata alone (no offsets asked for); raises
        :class:`BusError` if the topic is missing."""
        ...

    def log_ends(self, topic: str) -> dict[int, tuple[int, int]]:
        """:meth:`watermarks` whose high offset is where each partition's log really ends (found by
        reading its tail, not trusted from the broker's high watermark, which a broker may report
        too low); the seeds topic, written by any producer, is planned from these."""
        ...

    def read_range(self, topic: str, offsets: OffsetRange) -> list[Record]:
        """Every record in ``offsets``, which may hold gaps (offsets without a record: transaction
        markers, compacted records); raises :class:`BatchLostError` when the log no longer reaches
        the range (the caller skips the batch: its URLs are re-published from the store)."""
        ...

    def publish(self, topic: str, items: Iterable[tuple[bytes | None, bytes]]) -> list[bool]:
        """Produce ``(key, value)`` pairs (equal keys go to one partition) and wait for the acks.
        One flag per item, True once the broker confirmed it; the caller keeps unconfirmed items
        marked as such in the store and publishes them again on a later pass."""
        ...

    def partition_of(self, key: bytes, partitions: int) -> int:
        """The partition a message keyed ``key`` lands in on a topic of ``partitions`` partitions:
        lets a reader of the store tell which frontier partition holds a host's URLs without
        reading the topic (the frontier sensor's batch priorities)."""
        ...

    def close(self) -> None:
        """Flush and release the clients."""
        ...
