"""Seed intake: register the crawl requests of a seeds-topic offset range and admit their seeds.

:class:`SeedIntake` is what the ``crawls`` asset runs for each offset range the seeds sensor
hands it. A crawl submitted with ``use_sitemaps`` also gets the in-scope URLs of its seed
hosts' sitemaps (:mod:`crawl_platform.fetch.sitemaps`). Bad requests go to the dead-letter topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawl_platform.bus.base import Bus
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest, DeadLetter, MessageDecodeError, decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_dead_letters
from crawl_platform.config import Settings
from crawl_platform.extract.rules import RulesError, parse_rules
from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.sitemaps import discover_sitemap_urls
from crawl_platform.frontier.frontier import Frontier, FrontierGrowth
from crawl_platform.store.database import CrawlStore
from crawl_platform.urls import CrawlScope, InvalidURLError, canonicalize


@dataclass
class IntakeReport:
    crawls: list[str] = field(default_factory=list)
    dead_letters: int = 0
    admitted: int = 0
    published: int = 0


class SeedIntake:
    """Registers the crawl requests of one offset range of the seeds topic.

    With a ``fetcher``, a crawl submitted with ``use_sitemaps`` also gets the in-scope URLs of
    its seed hosts' sitemaps, admitted at depth 1 (up to the crawl's ``max_pages``).
    """

    def __init__(self, bus: Bus, store: CrawlStore, fetcher: Fetcher | None = None) -> None:
        self.bus = bus
        self.frontier = Frontier(store, bus)
        self.fetcher = fetcher

    @classmethod
    def from_settings(cls, settings: Settings) -> SeedIntake:
        return cls(KafkaBus.from_settings(settings), CrawlStore.from_settings(settings),
                   Fetcher.from_settings(settings))

    def register(self, offsets: OffsetRange) -> IntakeReport:
        report = IntakeReport()
        letters = []
        for rec in self.bus.read_range(self.bus.seeds_topic, offsets):
            try:
                request = decode_crawl_request(rec.value)
                if request.extract_rules:  # a producer other than ours may send rules that do not parse
                    parse_rules(request.extract_rules, "extract_rules")
                growth = self.frontier.register(request)
            except (MessageDecodeError, InvalidURLError, RulesError) as err:
                letters.append(DeadLetter.for_payload(str(err), self.bus.seeds_topic, rec.partition,
                                                      rec.offset, rec.value or b""))
                continue
            report.crawls.append(request.crawl_id)
            report.admitted += growth.admitted
            report.published += growth.published
            if request.use_sitemaps and self.fetcher is not None and request.max_depth >= 1:
                from_sitemaps = self._admit_sitemap_urls(request, self.fetcher)
                report.admitted += from_sitemaps.admitted
                report.published += from_sitemaps.published
        if letters:
            publish_dead_letters(self.bus, letters)
        report.dead_letters = len(letters)
        return report

    def _admit_sitemap_urls(self, request: CrawlRequest, fetcher: Fetcher) -> FrontierGrowth:
        scope = CrawlScope.from_row(request.scope, [canonicalize(s) for s in request.seeds],
                                    request.allow_patterns, request.deny_patterns)
        agent = request.user_agent or None
        urls: dict[str, None] = {}
        for seed in sorted({canonicalize(s) for s in request.seeds}):
            room = request.max_pages - len(urls)
            if room <= 0:
                break
            urls.update(dict.fromkeys(discover_sitemap_urls(fetcher, seed, room, user_agent=agent,
                                                            in_scope=scope.admits)))
        return self.frontier.admit(request.crawl_id, list(urls), depth=1)
