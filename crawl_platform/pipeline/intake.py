"""Seed intake: register the crawl requests of a seeds-topic offset range and admit their seeds.

:class:`SeedIntake` is what the seeds sensor runs for each new offset range of the seeds topic,
in its own evaluation, when the range asks for no network work (:meth:`SeedIntake.run_needed`);
otherwise the ``crawls`` asset runs it in an intake run. Each request is registered through
:func:`~crawl_platform.pipeline.registration.register_crawl`, the path every registration takes.
A crawl submitted with ``use_sitemaps`` also gets the in-scope URLs of its seed hosts' sitemaps
(:mod:`crawl_platform.fetch.sitemaps`), read within each host's politeness through the ``hosts``
table (:mod:`crawl_platform.store.hosts`) before its seeds are published. Bad requests go to the
dead-letter topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from crawl_platform.bus.base import Bus, Record
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest, DeadLetter, MessageDecodeError, decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_dead_letters
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.fetch.sitemaps import discover_sitemap_urls
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.registration import register_crawl
from crawl_platform.pipeline.submission import OUT_OF_REACH
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import one_line
from crawl_platform.store.hosts import load_hosts, save_hosts
from crawl_platform.urls import CrawlScope, canonicalize

# Most seeds a seeds-topic range may hold to be registered in the seeds sensor's own evaluation
# (admitted and published well within the evaluation's timeout); a larger submission gets an intake
# run, which has no evaluation timeout.
INLINE_SEEDS_MAX = 5_000


@dataclass
class IntakeReport:
    crawls: list[str] = field(default_factory=list)
    dead_letters: int = 0
    admitted: int = 0
    published: int = 0
    notes: list[str] = field(default_factory=list)  # one line each: what went wrong short of a dead letter

    def add(self, other: IntakeReport) -> None:
        self.crawls += other.crawls
        self.notes += other.notes
        self.dead_letters += other.dead_letters
        self.admitted += other.admitted
        self.published += other.published


class SeedIntake:
    """Registers the crawl requests of one offset range of the seeds topic.

    With a ``fetcher``, a crawl submitted with ``use_sitemaps`` also gets the in-scope URLs of
    its seed hosts' sitemaps, admitted at depth 1 (up to the crawl's ``max_pages``).
    """

    def __init__(self, bus: Bus, store: CrawlStore, fetcher: Fetcher | None = None) -> None:
        self.bus = bus
        self.store = store
        self.frontier = Frontier(store, bus)
        self.fetcher = fetcher

    @classmethod
    def from_settings(cls, settings: Settings) -> SeedIntake:
        return cls(KafkaBus.from_settings(settings), CrawlStore.from_settings(settings),
                   Fetcher.from_settings(settings))

    def run_needed(self, offsets: OffsetRange) -> str | None:
        """Why the range needs an intake run rather than the seeds sensor's own evaluation: a
        crawl in it reads sitemaps (network work, under politeness), or it holds more than
        :data:`INLINE_SEEDS_MAX` seeds. None when the sensor can register it at once."""
        return _run_needed(self.bus.read_range(self.bus.seeds_topic, offsets))

    def register_here(self, ranges: list[OffsetRange]) -> tuple[IntakeReport, list[OffsetRange], str]:
        """Register ``ranges`` in this process, in order, up to the first that needs an intake run
        (:meth:`run_needed`) or whose registration failed because the lake or the broker is out of
        reach. Returns what was registered, the ranges left for an intake run, and why (empty when
        none is left). Registration is idempotent per crawl id, so a range the run takes again
        adds nothing twice."""
        report = IntakeReport()
        for index, offsets in enumerate(ranges):
            try:
                records = self.bus.read_range(self.bus.seeds_topic, offsets)  # read once, for both
                why = _run_needed(records)
                if why is None:
                    report.add(self._register(records))
                    continue
            except OUT_OF_REACH as err:
                why = one_line(str(err)) or type(err).__name__
            return report, ranges[index:], why
        return report, [], ""

    def register(self, offsets: OffsetRange) -> IntakeReport:
        return self._register(self.bus.read_range(self.bus.seeds_topic, offsets))

    def _register(self, records: list[Record]) -> IntakeReport:
        """Register each request of ``records`` in order. One that cannot be registered for any
        reason of its own goes to the dead-letter topic with the reason and its position, and the
        next is taken; only the lake or the broker being out of reach (``OUT_OF_REACH``) stops the
        range, which is then taken again as a whole (registration is idempotent)."""
        report = IntakeReport()
        letters = []

        def sitemaps(request: CrawlRequest) -> list[str]:
            return self._sitemap_urls(request, report)

        for rec in records:
            try:
                request = decode_crawl_request(rec.value)  # the rules, schedule and patterns are checked here
                registered = register_crawl(self.frontier, request, sitemaps if self.fetcher is not None else None)
            except OUT_OF_REACH:
                raise
            except Exception as err:  # any request that cannot be registered is a dead letter
                reason = (str(err) if isinstance(err, ValueError) and str(err)
                          else f"{type(err).__name__}: {err}")
                letters.append(DeadLetter.for_payload(one_line(reason), self.bus.seeds_topic, rec.partition,
                                                      rec.offset, rec.value or b""))
                continue
            report.crawls.append(registered.crawl_id)
            report.admitted += registered.admitted
            report.published += registered.published
        if letters:
            publish_dead_letters(self.bus, letters)
        report.dead_letters = len(letters)
        return report

    def _sitemap_urls(self, request: CrawlRequest, report: IntakeReport) -> list[str]:
        """:meth:`_discover_sitemap_urls`, or none when discovery fails for a reason of the sites'
        (a robots.txt or a sitemap the fetcher or its parser cannot handle): the crawl is then
        registered with its seeds alone, and ``report.notes`` says why."""
        try:
            return self._discover_sitemap_urls(request)
        except OUT_OF_REACH:
            raise
        except Exception as err:  # a site's files never stop the registration
            report.notes.append(one_line(f"crawl {request.crawl_id}: its sitemaps were not read "
                                         f"({type(err).__name__}: {err})"))
            return []

    def _discover_sitemap_urls(self, request: CrawlRequest) -> list[str]:
        """The in-scope URLs of the seed hosts' sitemaps, for a crawl submitted with ``use_sitemaps``.
        Read within each host's politeness as the batch runs keep it: the fetcher starts from the
        ``hosts`` rows (robots.txt, gap, last contact), and what it learned (the robots.txt it
        fetched, when it last asked the host) is saved there, so the first batch run on the host
        keeps its gap after these requests and reads robots.txt from the table."""
        fetcher = self.fetcher
        if fetcher is None or not request.use_sitemaps or request.max_depth < 1:
            return []
        seeds = sorted({canonicalize(s) for s in request.seeds})
        scope = CrawlScope.from_row(request.scope, seeds, request.allow_patterns, request.deny_patterns,
                                    request.crawl_id)
        origins = {origin_of(seed) for seed in seeds}
        with self.store.read() as con:
            fetcher.prime(load_hosts(con, origins).values())
        agent = request.user_agent or None
        urls: dict[str, None] = {}
        try:
            for seed in seeds:
                room = request.max_pages - len(urls)
                if room <= 0:
                    break
                urls.update(dict.fromkeys(discover_sitemap_urls(fetcher, seed, room, user_agent=agent,
                                                                in_scope=scope.admits)))
        finally:
            learned = fetcher.host_records(origins)
            if learned:
                with self.store.write() as con:
                    save_hosts(con, learned, datetime.now(UTC).replace(tzinfo=None))
        return list(urls)


def _run_needed(records: list[Record]) -> str | None:
    """See :meth:`SeedIntake.run_needed`."""
    seeds = 0
    for rec in records:
        try:
            request = decode_crawl_request(rec.value)
        except MessageDecodeError:
            continue  # a dead letter either way
        if request.use_sitemaps and request.max_depth >= 1:
            return f"crawl {request.crawl_id} reads sitemaps"
        seeds += len(request.seeds)
        if seeds > INLINE_SEEDS_MAX:
            return f"more than {INLINE_SEEDS_MAX:,} seeds"
    return None
