"""Which batch partitions are past retention, so the orchestrator can forget them.

Every frontier batch is a dynamic partition, and a platform running for months makes hundreds of
thousands; Dagster advises at most about 100k per asset, and its UI slows well before. A batch
older than Kafka's retention cannot be fetched again anyway (its offsets are gone from the log),
so its partition is only history, and that history stays in the lake (``pages.batch_id``,
``batch_items``). The age of a batch is the time of its last run: the latest event of its
partition (a run planned for it, or its materialisation), which the orchestrator records.
:func:`expired_batches` holds the rule, with partitions given oldest first (in the order they
were added); ``CRAWL_BATCH_RETENTION_DAYS`` sets the age.
"""

from __future__ import annotations

from collections.abc import Sequence, Set


def retention_cutoff(now: float, retention_days: float) -> float | None:
    """Epoch seconds before which a batch's last run makes it expire; None keeps everything."""
    return now - retention_days * 86_400 if retention_days > 0 else None


def expired_batches(keys_oldest_first: Sequence[str], recent: Set[str], seen: Set[str]) -> list[str]:
    """The keys to remove: those whose last run is before the cutoff (in ``seen``, not in
    ``recent``), and those with no run recorded at all that were added before such a key (they
    are older still: partitions are added in time order). A recent key is kept however old it
    is (someone materialised it again), and so are unseen keys after the last expired one (just
    added, their run not planned yet)."""
    last_expired = max((i for i, key in enumerate(keys_oldest_first) if key in seen and key not in recent),
                       default=-1)
    return [key for i, key in enumerate(keys_oldest_first)
            if i <= last_expired and key not in recent and (key in seen or i < last_expired)]
