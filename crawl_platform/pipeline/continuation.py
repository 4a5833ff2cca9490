"""A batch run that goes on to its partitions' next link level by itself.

A batch's links to its own hosts go back to the frontier partitions the batch read (the topic is
keyed by host), so a site's next link level is waiting there as soon as the batch's frontier
step published it. Cutting that into a new run costs a sensor pass, a queue pass and a run start,
seconds however few pages the level has. Instead, a run the frontier sensor started goes on:
for up to ``CRAWL_RUN_CONTINUE_S`` it reads what arrived on its partitions after its batch, as the
next batch (with its own partition key, which names its offset ranges, so materialising it again
fetches exactly that), fetches, lands and expands it in the same process, and so on until its
partitions hold nothing new.

What keeps it correct:

- Only the run reads its partitions: while a batch run that holds a partition is queued or
  running, the frontier sensor cuts nothing from it (``plan_frontier``'s ``held``). No two runs
  read the same offsets, and a host is still fetched by one run at a time.
- Every landed batch records its offset ranges in the lake (``batch_ranges``, in its landing
  transaction). A continuing run goes on from the last range landed on its partitions (so a
  retried run does not fetch a level twice), and once no run holds a partition the sensor moves
  its cursor past what landed there (:func:`crawl_platform.pipeline.loop.advance_to_landed`). A
  level read but never landed (its run died) is cut again.
- Everything else is the batch's own: a duplicate delivery is skipped, a paused or cancelled
  crawl's URLs are held, a broker that lost its log ends the continuation (the sensor then
  requeues, as always).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from crawl_platform.bus.offsets import Batch, batch_key, parse_batch_key, plan_batches
from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import FrontierGrowth
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.parse.pool import ParseWorkers
from crawl_platform.pipeline.batch import BatchCrawler, BatchReport, PreparedBatch
from crawl_platform.pipeline.loop import LoopPolicy
from crawl_platform.pipeline.shard import ShardResult


@dataclass(frozen=True)
class Level:
    """One more batch a run takes on: its partition key and offset ranges (one per partition)."""

    key: str
    ranges: Batch

    @property
    def ends(self) -> dict[int, int]:
        return {r.partition: r.end for r in self.ranges}


@dataclass(frozen=True)
class FetchedLevel:
    """A level read and fetched, not yet landed (``shard`` None: the broker lost it)."""

    level: Level
    prepared: PreparedBatch
    shard: ShardResult | None

    @property
    def urls(self) -> frozenset[str]:
        return frozenset(r.url for r in self.prepared.requests)


@dataclass(frozen=True)
class LevelDone:
    """A level fetched, landed and expanded."""

    level: Level
    report: BatchReport
    growth: FrontierGrowth
    lost: str = ""  # why the broker no longer held it: nothing landed, and the run stops going on


class Continuation:
    """Cuts and runs the next levels of a batch run's partitions. ``batch_size`` gives the
    messages per partition of the next level (the sensor's own, see :class:`LoopPolicy`); it is
    asked once per level, so an auto size follows the hosts queued."""

    def __init__(self, crawler: BatchCrawler, batch_size: Callable[[], int]) -> None:
        self.crawler = crawler
        self.batch_size = batch_size
        self.read_model = FrontierReadModel(crawler.store)

    @classmethod
    def from_settings(cls, settings: Settings, workers: ParseWorkers | None = None) -> Continuation:
        """A continuation with the sensor's batch size (an auto size from the hosts queued);
        ``workers``: parse workers lent by their owner."""
        crawler = BatchCrawler.from_settings(settings, workers)
        read_model = FrontierReadModel(crawler.store)

        def batch_size() -> int:  # the sensor's policy; the hosts queued are read only for an auto size
            hosts = 0 if settings.batch_size else read_model.queued_hosts()
            return LoopPolicy.from_settings(settings, hosts).batch_size

        return cls(crawler, batch_size)

    def close(self) -> None:
        """Ends the parse workers and the fetcher's connections."""
        self.crawler.close()

    def first_level(self, key: str) -> Level | None:
        """The level after batch ``key``: from the end of ``key``'s ranges or of the last range
        landed on its partitions, whichever is later (a retried run goes on where it was)."""
        epoch, ranges = parse_batch_key(key)
        ends = {r.partition: r.end for r in ranges}
        for partition, end in self.read_model.landed_ends(epoch, ends).items():
            ends[partition] = max(ends[partition], end)
        return self._cut(epoch, ends)

    def next_level(self, done: Level) -> Level | None:
        """The level after ``done``, which this run just landed."""
        return self._cut(parse_batch_key(done.key)[0], done.ends)

    def fetch(self, level: Level, skip: frozenset[str] = frozenset()) -> FetchedLevel:
        """Read and fetch the level (duplicate deliveries left out, and the URLs in ``skip``: those
        of the level still landing beside it). A level the broker no longer holds fetches nothing."""
        crawler = self.crawler
        prepared = crawler.prepare(level.key, level.ranges, refetch_done=False)
        if prepared.lost:
            return FetchedLevel(level, prepared, None)
        if skip:
            prepared.requests = [r for r in prepared.requests if r.url not in skip]
        return FetchedLevel(level, prepared, crawler.fetch_shard(prepared.requests, prepared.hosts, level.key))

    def finish(self, fetched: FetchedLevel) -> LevelDone:
        """Land and expand a fetched level, as a batch run's landing and frontier steps do."""
        level, prepared = fetched.level, fetched.prepared
        if fetched.shard is None:
            return LevelDone(level, prepared.report, FrontierGrowth(0, 0, 0, 0), lost=prepared.lost)
        report = self.crawler.land(prepared, [fetched.shard])
        return LevelDone(level, report, self.crawler.expand(level.key))

    def run(self, level: Level) -> LevelDone:
        """Fetch, land and expand the level (duplicates skipped). A level the broker no longer
        holds lands nothing (``lost``), as a lost batch does."""
        return self.finish(self.fetch(level))

    def _cut(self, epoch: int, ends: dict[int, int]) -> Level | None:
        """What arrived on the partitions of ``ends`` after them, up to a batch; None when nothing
        did, or when the broker lost a partition's log (the sensor requeues then)."""
        bus = self.crawler.bus
        # Only this run's partitions are asked for: on the embedded broker each read walks the
        # partition's log, so its cost grows with the log (see KafkaBus.watermarks).
        marks = bus.watermarks(bus.frontier_topic, skip=set(range(bus.partitions)) - set(ends))
        held = {p: marks[p] for p in ends if p in marks}
        if len(held) < len(ends):
            return None
        cut = plan_batches(held, ends, self.batch_size(), max_batches=1, groups=1)
        if cut.lost_partitions or not cut.batches:
            return None
        return Level(batch_key(epoch, cut.batches[0]), cut.batches[0])


def continue_levels(continuation: Continuation, key: str, seconds: float,
                    before_level: Callable[[Level], object] = lambda _level: None,
                    clock: Callable[[], float] = time.monotonic) -> Iterator[LevelDone]:
    """Run the levels after batch ``key`` for up to ``seconds`` (a level started runs to its
    end), yielding each once it landed and expanded; ``before_level`` is called with each level
    before it is read (the Dagster layer registers its partition there).

    When more is already waiting on the partitions once a level's fetch is over (a backlog: the
    previous levels published more than a batch), the next level is read and fetched in a thread
    while this one lands and expands, so the fetch never waits for the lake and the broker. Its
    host pacer is the same (its hosts' gaps hold across both), and the URLs of the level still
    landing are left out of it (a URL delivered twice is fetched once). A level that fails
    leaves the one fetched beside it unlanded: the retry goes on from the last level landed."""
    deadline = clock() + seconds
    level = continuation.first_level(key) if seconds > 0 else None
    if level is None or clock() >= deadline:
        return
    before_level(level)
    fetched: FetchedLevel | None = continuation.fetch(level)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="next-level") as ahead_pool:
        while fetched is not None:
            ahead: Future[FetchedLevel] | None = None
            following = (continuation.next_level(fetched.level)
                         if fetched.shard is not None and clock() < deadline else None)
            if following is not None:
                before_level(following)
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
            elif not done.lost and clock() < deadline and (following := continuation.next_level(done.level)):
                before_level(following)  # what the level's own expansion published
                fetched = continuation.fetch(following)
            else:
                fetched = None
