"""The crawl loop in one process: the coordinator's decisions, each batch run at once, here.

:class:`CrawlLoop` is the in-process driver of a crawl, for tests, benchmarks and scripts. Each
turn asks the :class:`~crawl_platform.pipeline.coordinator.CrawlCoordinator` what to take from the
seeds and control topics and what to run for the frontier topic (the decisions the Dagster sensors
turn into runs), then does it: registers crawls (:class:`~crawl_platform.pipeline.intake.SeedIntake`),
applies control commands (:class:`~crawl_platform.pipeline.control.ControlIntake`), and reads,
fetches, lands and expands each batch (:class:`~crawl_platform.pipeline.batch.BatchCrawler`, the
calls a batch run under Dagster makes in its steps). Its run queue is always empty
(:data:`~crawl_platform.pipeline.coordinator.IN_PROCESS`), and its batches do not go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.config import Settings
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.control import ControlIntake
from crawl_platform.pipeline.coordinator import CrawlCoordinator
from crawl_platform.pipeline.intake import SeedIntake
from crawl_platform.pipeline.planning import LoopPolicy, PlannedBatch
from crawl_platform.pipeline.reader import BatchReport


@dataclass
class LoopReport:
    """What :meth:`CrawlLoop.run_until_idle` did."""

    turns: int = 0
    crawls_registered: list[str] = field(default_factory=list)
    batches: list[BatchReport] = field(default_factory=list)
    requeued: int = 0
    controls: int = 0  # control commands applied


class CrawlLoop:
    """Runs the coordinator's decisions in this process, one batch after another.

    ``before_batch`` is called with each planned batch before it runs (tests inject faults there).
    """

    def __init__(self, crawler: BatchCrawler, intake: SeedIntake, coordinator: CrawlCoordinator,
                 before_batch: Callable[[PlannedBatch], None] | None = None,
                 control: ControlIntake | None = None) -> None:
        self.crawler = crawler
        self.intake = intake
        self.coordinator = coordinator
        self.control = control or ControlIntake(crawler.bus, crawler.store)
        self.before_batch = before_batch
        self.seeds_cursor: str | None = None
        self.control_cursor: str | None = None
        self.frontier_cursor: str | None = None

    @classmethod
    def with_policy(cls, crawler: BatchCrawler, intake: SeedIntake, policy: LoopPolicy,
                    before_batch: Callable[[PlannedBatch], None] | None = None) -> CrawlLoop:
        """A loop over ``crawler``'s bus and store that cuts batches by ``policy`` alone (no
        automatic size) and sweeps every idle turn."""
        coordinator = CrawlCoordinator(crawler.bus, crawler.store, policy, events=crawler.events, sweep_every_s=0.0)
        return cls(crawler, intake, coordinator, before_batch)

    @classmethod
    def from_settings(cls, settings: Settings, before_batch: Callable[[PlannedBatch], None] | None = None,
                      ) -> CrawlLoop:
        """The loop the settings describe; an idle turn always sweeps (no tick to spare the lake)."""
        crawler = BatchCrawler.from_settings(settings)
        coordinator = CrawlCoordinator.from_settings(settings, crawler.bus, crawler.store, continuing=False,
                                                     sweep_every_s=0.0)
        return cls(crawler, SeedIntake.from_settings(settings), coordinator, before_batch)

    def turn(self, report: LoopReport) -> bool:
        """One turn over the seeds, control and frontier topics; False when it found nothing to do."""
        busy = False
        seeds = self.coordinator.seeds_turn(self.seeds_cursor)
        self.seeds_cursor = seeds.cursor
        for key in seeds.range_keys:
            report.crawls_registered += self.intake.register(OffsetRange.parse(key)).crawls
            busy = True
        controls = self.coordinator.control_turn(self.control_cursor)
        self.control_cursor = controls.cursor
        for key in controls.range_keys:
            report.controls += len(self.control.apply(OffsetRange.parse(key)).outcomes)
            busy = True
        plan = self.coordinator.frontier_turn(self.frontier_cursor).plan
        if plan is None:  # never: the in-process run queue refuses nothing
            return busy
        self.frontier_cursor = plan.cursor
        for _requeue in plan.requeues:
            report.requeued += self.crawler.frontier.requeue_all_pending().published
            busy = True
        for batch in plan.batches:
            if self.before_batch is not None:
                self.before_batch(batch)
            report.batches.append(self.crawler.fetch_and_land(batch.key, batch.ranges, refetch_done=False))
            self.crawler.expand(batch.key)
            busy = True
        return busy

    def run_until_idle(self, max_turns: int = 1_000) -> LoopReport:
        """Turn until a turn finds nothing to do; raises RuntimeError after ``max_turns``."""
        report = LoopReport()
        while report.turns < max_turns:
            report.turns += 1
            if not self.turn(report):
                return report
        raise RuntimeError(f"the crawl loop still had work after {max_turns} turns")
