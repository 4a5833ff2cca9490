"""A batch run that goes on to its partitions' next batch by itself.

A batch's links to its own hosts go back to the frontier partitions the batch read (the topic is
keyed by host), so what the batch published is waiting there as soon as its frontier step is
over. Cutting that into a new run costs a sensor pass, a queue pass and a run start, however few
URLs it holds. Instead, a run the frontier sensor started goes on: for up to
``CRAWL_RUN_CONTINUE_S`` it asks the coordinator for what arrived on its partitions after its
batch (:meth:`~crawl_platform.pipeline.coordinator.CrawlCoordinator.next_batch_after`: the next
batch, with its own partition key, which names its offset ranges, so materialising it again
fetches exactly that), reads, fetches, lands and expands it in the same process, and so on until
its partitions hold nothing new.

What keeps it correct:

- Only the run reads its partitions: while a batch run that holds a partition is queued or
  running, the frontier sensor cuts nothing from it (``plan_frontier``'s ``held``). No two runs
  read the same offsets, and a host is still fetched by one run at a time.
- Every landed batch records its offset ranges in the lake (``batch_ranges``, in its landing
  transaction). A continuing run goes on from the last range landed on its partitions (so a
  retried run does not fetch a batch twice), and the frontier sensor moves its cursor past what
  landed (:meth:`~crawl_platform.pipeline.coordinator.CrawlCoordinator.landed_ends`). A batch
  read but never landed (its run died) is cut again.
- Everything else is the batch's own: a duplicate delivery is skipped, a paused or cancelled
  crawl's URLs are held, a broker that lost its log ends the continuation (the sensor then
  requeues, as always).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import FrontierGrowth
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.coordinator import IN_PROCESS, CrawlCoordinator, NextBatch, PartitionRegistry
from crawl_platform.pipeline.reader import BatchReport, PreparedBatch
from crawl_platform.pipeline.shard import ShardResult


@dataclass(frozen=True)
class FetchedBatch:
    """A next batch read and fetched, not yet landed (``shard`` None: the broker lost it)."""

    batch: NextBatch
    prepared: PreparedBatch
    shard: ShardResult | None

    @property
    def urls(self) -> frozenset[str]:
        return frozenset(r.url for r in self.prepared.requests)


@dataclass(frozen=True)
class ContinuedBatch:
    """A next batch fetched, landed and expanded."""

    batch: NextBatch
    report: BatchReport
    growth: FrontierGrowth
    lost: str = ""  # why the broker no longer held it: nothing landed, and the run stops going on


class Continuation:
    """Runs the next batches of a batch run's partitions, as the ``coordinator`` cuts them."""

    def __init__(self, crawler: BatchCrawler, coordinator: CrawlCoordinator) -> None:
        self.crawler = crawler
        self.coordinator = coordinator

    @classmethod
    def from_settings(cls, settings: Settings, workers: ParseWorkers | None = None) -> Continuation:
        """A continuation with the settings' coordinator (the frontier sensor's batch size);
        ``workers``: parse workers lent by their owner."""
        crawler = BatchCrawler.from_settings(settings, workers)
        return cls(crawler, CrawlCoordinator.from_settings(settings, crawler.bus, crawler.store))

    def close(self) -> None:
        """Ends the parse workers and the fetcher's connections."""
        self.crawler.close()

    def fetch(self, batch: NextBatch, skip: frozenset[str] = frozenset()) -> FetchedBatch:
        """Read and fetch the batch (duplicate deliveries left out, and the URLs in ``skip``: those
        of the batch still landing beside it). A batch the broker no longer holds fetches nothing."""
        crawler = self.crawler
        prepared = crawler.prepare(batch.key, batch.ranges, refetch_done=False)
        if prepared.lost:
            return FetchedBatch(batch, prepared, None)
        if skip:
            prepared.requests = [r for r in prepared.requests if r.url not in skip]
        return FetchedBatch(batch, prepared, crawler.fetch_shard(prepared.requests, prepared.hosts, batch.key))

    def finish(self, fetched: FetchedBatch) -> ContinuedBatch:
        """Land and expand a fetched batch, as a batch run's landing and frontier steps do."""
        batch, prepared = fetched.batch, fetched.prepared
        if fetched.shard is None:
            return ContinuedBatch(batch, prepared.report, FrontierGrowth(0, 0, 0, 0), lost=prepared.lost)
        report = self.crawler.land(prepared, [fetched.shard])
        return ContinuedBatch(batch, report, self.crawler.expand(batch.key))

    def run(self, batch: NextBatch) -> ContinuedBatch:
        """Fetch, land and expand the batch (duplicates skipped). A batch the broker no longer
        holds lands nothing (``lost``), as a lost batch does."""
        return self.finish(self.fetch(batch))


def continue_batches(continuation: Continuation, key: str, seconds: float,
                     partitions: PartitionRegistry = IN_PROCESS,
                     clock: Callable[[], float] = time.monotonic) -> Iterator[ContinuedBatch]:
    """Run the batches after batch ``key`` for up to ``seconds`` (a batch started runs to its
    end), yielding each once it landed and expanded; each is added to ``partitions`` when it is
    cut, before it is read.

    When more is already waiting on the partitions once a batch's fetch is over (a backlog: the
    batches before published more than a batch), the next batch is read and fetched in a thread
    while this one lands and expands, so the fetch never waits for the lake and the broker. Its
    host pacer is the same (its hosts' gaps hold across both), and the URLs of the batch still
    landing are left out of it (a URL delivered twice is fetched once). A batch that fails
    leaves the one fetched beside it unlanded: the retry goes on from the last batch landed."""
    coordinator = continuation.coordinator
    deadline = clock() + seconds
    if seconds <= 0 or clock() >= deadline:
        return
    batch = coordinator.next_batch_after(key, partitions)
    if batch is None:
        return
    fetched: FetchedBatch | None = continuation.fetch(batch)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="next-batch") as ahead_pool:
        while fetched is not None:
            ahead: Future[FetchedBatch] | None = None
            following = (coordinator.next_batch(fetched.batch, partitions)
                         if fetched.shard is not None and clock() < deadline else None)
            if following is not None:
                ahead = ahead_pool.submit(continuation.fetch, following, fetched.urls)
            try:
                done = continuation.finish(fetched)
            except BaseException:
                if ahead is not None:
                    ahead.cancel()  # leaving the pool still waits for a fetch already running
                raise
            yield done
            if ahead is not None:
                fetched = ahead.result()
            elif not done.lost and clock() < deadline and (following := coordinator.next_batch(done.batch,
                                                                                                partitions)):
                fetched = continuation.fetch(following)  # what the batch's own expansion published
            else:
                fetched = None
