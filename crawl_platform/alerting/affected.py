"""Which crawls a failed run or check concerned, so that an alert can name them.

A batch (a partition key of offset ranges) belongs to the crawls of its URLs: the lake's
``batch_items`` names them once the batch landed; before that (the usual case for a failed
batch run) its messages are read back from the frontier topic. Both answers are best effort:
an alert about a broken lake or broker must still go out, so any error gives an empty list
and the alert says the batch instead. Neighbours: :mod:`.alerts` (which renders the names),
:class:`~crawl_platform.store.database.CrawlStore` and the :class:`~crawl_platform.bus.base.Bus`.
"""

from __future__ import annotations

import duckdb

from crawl_platform.bus.base import Bus, BusError
from crawl_platform.bus.messages import MessageDecodeError, decode_frontier_url
from crawl_platform.bus.offsets import parse_batch_key
from crawl_platform.store import batches as batches_table
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import StoreBusyError, StoreUnavailableError

_STORE_ERRORS = (duckdb.Error, StoreBusyError, StoreUnavailableError, OSError)


def crawls_of_batches(store: CrawlStore, batches: list[str], bus: Bus | None = None) -> list[str]:
    """The crawl ids of ``batches`` (sorted): from ``batch_items``, else from the bus when given."""
    if not batches:
        return []
    try:
        if store.exists():
            with store.read() as con:
                crawls = batches_table.crawls_of(con, batches)
            if crawls:
                return sorted(str(c) for c in crawls)
    except _STORE_ERRORS:
        pass
    return _crawls_on_bus(bus, batches) if bus is not None else []


def _crawls_on_bus(bus: Bus, batches: list[str]) -> list[str]:
    crawls: set[str] = set()
    try:
        for key in batches:
            _epoch, ranges = parse_batch_key(key)
            for offsets in ranges:
                for record in bus.read_range(bus.frontier_topic, offsets):
                    try:
                        crawls.add(decode_frontier_url(record.value).crawl_id)
                    except MessageDecodeError:
                        continue
    except (BusError, ValueError):
        pass
    return sorted(crawls)
