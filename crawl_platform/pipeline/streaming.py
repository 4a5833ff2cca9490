"""Landing while the fetch goes on: a fetched page is readable in the lake within seconds, at any politeness.

A batch lands in one transaction once all its shards are fetched (:class:`~crawl_platform.pipeline.batch.BatchLander`).
At a polite crawl's pace a shard fetches for minutes, so its first pages would wait minutes to be
readable. :class:`StreamingLanding` lands a fetch step's pages in rounds while it fetches, one every
``every_s`` seconds (``CRAWL_LAND_EVERY_S``) and a last one when the fetch is over, each a lake
commit of its own: the round's responses
go to a WARC file of their own, then their ``pages``, ``documents`` and ``links`` rows are written
under the batch's id (:func:`~crawl_platform.pipeline.landing.land_pages`). The batch's landing then
writes the rest, every item of the batch and its hosts, and counts the rounds' versions as its own
(:class:`~crawl_platform.pipeline.landing.StreamedPages`); expansion and page events read the
batch's pages by its id, so they see the rounds' pages too.

A round lands only what the batch's landing would write unchanged: neither the pages of crawls
that render (the render step may replace their parse), nor pages whose body is their latest stored
version (nothing to write), nor robots-disallowed URLs or ``304`` answers; an HTML page waits for
its parse. A round that fails leaves its pages to the next round or to the batch's landing (landing
a page again adds no version, since its content hash is then the latest), so nothing is lost. A round
is skipped while the fetch, at its pace so far, ends within ``every_s`` (a site without a delay):
such a shard lands with its batch alone, with no extra commit where its pages land within seconds
anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from crawl_platform.archive.writer import RecordPointer, archive_results, shard_file_name
from crawl_platform.fetch.fetcher import FetchRequest, FetchResult
from crawl_platform.parse.html import ParsedPage
from crawl_platform.parse.pool import ParsePool
from crawl_platform.pipeline.landing import StreamedPages, known_versions, land_pages
from crawl_platform.redaction import redact_passwords
from crawl_platform.storage import Folder
from crawl_platform.store.database import CrawlStore

log = logging.getLogger(__name__)

# How long a round waits for the parses of the pages it hands the parse workers: a chunk takes
# milliseconds, so the round's pages land in it rather than one round later.
PARSE_WAIT_S = 1.0


class StreamingLanding:
    """Lands the pages of each shard a fetch step fetches in rounds of ``every_s`` seconds, in
    ``store`` (and their responses in ``archive``, when archiving)."""

    def __init__(self, store: CrawlStore, every_s: float, archive: Folder | None = None) -> None:
        self.store = store
        self.every_s = every_s
        self.archive = archive

    @classmethod
    def of(cls, store: CrawlStore, every_s: float, archive: bool) -> StreamingLanding | None:
        """Rounds every ``every_s`` seconds in ``store`` (its archive too, with ``archive``); None for 0."""
        return cls(store, every_s, store.archive if archive else None) if every_s > 0 else None

    def start(self, batch_id: str, shard: str, requests: list[FetchRequest], pool: ParsePool) -> ShardStream:
        """The rounds of one shard, from now until :meth:`ShardStream.finish`."""
        return ShardStream(self, batch_id, shard, requests, pool)


class ShardStream:
    """One shard's rounds: :meth:`add` from the fetch threads, a round every ``every_s`` on a thread
    of its own, :meth:`finish` once the fetch is over."""

    def __init__(self, landing: StreamingLanding, batch_id: str, shard: str, requests: list[FetchRequest],
                 pool: ParsePool) -> None:
        self.landing = landing
        self.batch_id = batch_id
        self.shard = shard
        self.pool = pool
        # The crawl each page lands under: the first of the crawls that want it, as in the batch's landing.
        self.crawl_of = {r.url: r.crawl_ids[0] for r in requests if r.render == "never" and r.crawl_ids}
        self.known = known_versions(requests)  # what the reader found: a round reads only what landed since
        self.landed = StreamedPages()
        # Those landed, as they landed (an archive error noted), without their bodies and headers.
        self.results: dict[str, FetchResult] = {}
        self._parsed: dict[str, ParsedPage] = {}  # every parse the pool handed over, landed or not
        self._waiting: list[FetchResult] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failed = False
        self._rounds_started = 0
        self._total = len({r.url for r in requests})  # results to come
        self._done = 0
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"land-rounds-{shard}", daemon=True)
        self._thread.start()

    def add(self, result: FetchResult, landable: bool = True) -> None:
        """A fetch result (from a fetch thread; never raises): it lands in the next round if it may
        (not ``landable``: a page whose body the lake has, which only counts towards the progress)."""
        with self._lock:
            self._done += 1
            if landable and result.url in self.crawl_of and not result.disallowed and not result.not_modified:
                self._waiting.append(result)

    def _ends_soon(self) -> bool:
        """Whether the fetch, at its pace so far, ends within a round's interval: its pages then
        land with the last round or the batch as soon as a round would land them."""
        elapsed = time.monotonic() - self._started
        with self._lock:
            done = self._done
        return done > 0 and (self._total - done) * elapsed / done < self.landing.every_s

    def finish(self) -> tuple[StreamedPages, dict[str, ParsedPage]]:
        """Stop after the round in progress, then, if the shard fetched for longer than a round's
        interval, land what is left in one last round (its pages are readable then, not after the
        batch's landing); what the rounds landed, and the parses they took from the pool that the
        batch's landing still needs (every one of a page that did not land)."""
        self._stop.set()
        self._thread.join()
        if self._rounds_started:
            self._round()
        return self.landed, {url: page for url, page in self._parsed.items() if url not in self.landed.urls}

    def _run(self) -> None:
        while not self._stop.wait(self.landing.every_s):
            if not self._ends_soon():
                self._rounds_started += 1
                self._round()

    def _round(self) -> None:
        self._parsed.update(self.pool.harvest(PARSE_WAIT_S))
        with self._lock:
            waiting, self._waiting = self._waiting, []
        ready = [r for r in waiting if not r.is_html or r.url in self._parsed]
        later = [r for r in waiting if r.is_html and r.url not in self._parsed]
        if ready:
            try:
                self._land(ready)
            except Exception as err:  # left to the next round, or to the batch's landing
                self._note_failure(err)
                later = ready + later
        if later:
            with self._lock:
                self._waiting[:0] = later

    def _land(self, results: list[FetchResult]) -> None:
        pointers: dict[str, RecordPointer] = {}
        if self.landing.archive is not None:
            name = shard_file_name(self.batch_id, f"{self.shard}-r{self.landed.rounds + 1}")
            pointers, not_archived = archive_results(self.landing.archive, name, results,
                                                     {"isPartOf": self.batch_id or "batch", "shard": self.shard})
            # The page lands all the same, with the reason, as in the batch's landing.
            results = [replace(r, error=r.error or f"not archived: {not_archived[r.url]}")
                       if r.url in not_archived else r for r in results]
        landed = land_pages(self.landing.store, self.batch_id, results, self.crawl_of,
                            {r.url: self._parsed[r.url] for r in results if r.url in self._parsed}, pointers,
                            self.known)
        self.landed.add(landed)
        # The batch's landing needs only how each ended: the step lets go of their bodies here.
        self.results.update((r.url, replace(r, body=b"", exchange=None, hops=())) for r in results)

    def _note_failure(self, err: Exception) -> None:
        if not self._failed:  # once per shard: a lake that is down says so at every round
            log.warning("batch %s shard %s: landing pages early failed; they land with the batch (%s: %s)",
                        self.batch_id, self.shard, type(err).__name__, redact_passwords(str(err)))
        self._failed = True
