"""Parsing beside the fetch: a fetch step's HTML pages are parsed in worker processes while its
fetch threads go on.

A fetch step's process spends about as much CPU fetching (the HTTP client is Python) as parsing,
and both need the GIL: parsed after the fetch, a one-host batch keeps one core busy and leaves the
other idle. :class:`ParsePool` hands the pages to :class:`ParseWorkers` in chunks as they arrive
(:meth:`ParsePool.add`, called from the fetch threads), so fetching and parsing overlap on
separate cores. Once the fetch is over, the step's process is idle, so :meth:`ParsePool.parsed`
parses too: the chunks no worker has taken yet, from the last one back, while the workers take
them from the first (and the chunks that came before any worker had started, so a crawl's seed
never waits for a new interpreter); it waits for the rest. With 0 workers
(``CRAWL_PARSE_WORKERS=0``), or where a process cannot start children, the pages are parsed in the
step's own process after the fetch. A chunk whose worker died or failed is parsed again in the
step's process, so nothing is lost and a page's parse error is the one a worker would have given.

The workers are new interpreters that import only the parser (``spawn``), not forks of the step's
process: a forked worker would inherit the heap of a Dagster run, and keep a private copy of every
page of it that the run then wrote or freed, several times a new interpreter's memory on a long
crawl (measured by ``benchmarks/cpu_by_kind.py --memory``). They die with the step's process
(``PR_SET_PDEATHSIG``): a killed run leaves no parse worker behind. One set of workers serves every
pool of its owner (:class:`~crawl_platform.pipeline.shard.ShardFetcher`, or a Dagster run's process,
which lends them to each of its steps), so a run that goes on batch after batch starts them once.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing.context
import os
import signal
import sys
import threading
import time
import types
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from crawl_platform.parse import MAX_LINKS_PER_PAGE
from crawl_platform.parse.html import DEFAULT_ENGINE, ParsedPage, ParserEngine, parse_html

if TYPE_CHECKING:
    from crawl_platform.fetch.fetcher import FetchResult

Page = tuple[str, bytes, str, str | None]  # URL, body, final URL (the base of its links), content type
Parsed = list[tuple[str, ParsedPage]]

CHUNK_PAGES = 16  # pages per hand-over: one round trip to a worker costs about what a small page's parse does
CHUNK_BYTES = 512 * 1024  # a chunk of huge pages (index pages of a docs site) goes sooner
# Most pages handed to the workers and not yet parsed before a fetch thread that hands over another
# chunk waits for the oldest (up to HOLD_MAX_S): enough to keep a worker busy, few enough that on a
# machine whose cores are all busy a page waits seconds for its parse, not the rest of its batch, and
# lands in the next round (crawl_platform.pipeline.streaming). The fetch then goes at the parse's pace,
# which bounds the crawl's pages/s in that case anyway.
MAX_UNPARSED = 256
HOLD_MAX_S = 10.0
_PR_SET_PDEATHSIG = 1


def parse_pages(pages: list[Page], engine: ParserEngine, main_content: bool,
                max_links: int = MAX_LINKS_PER_PAGE) -> Parsed:
    """Parse a chunk of pages (what a worker runs; also the step's own fallback). Never raises: a
    page the parser fails on is in the chunk's result with its error."""
    return [(url, parse_html(body, base, content_type, engine, main_content=main_content, max_links=max_links))
            for url, body, base, content_type in pages]


_WARM_URL = "http://warm-up.invalid/"
_WARM_PAGE = b"<html><head><title>warm-up</title></head><body><p>A <a href='/a#b'>link</a>.</p></body></html>"


def start_as_child(parent: int) -> None:
    """What a worker process started with :class:`WorkerContext` does first: exit with ``parent``,
    even when that is killed (no atexit runs then), and leave Ctrl-C to it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the owner's own shutdown still ends the workers
        pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_init(parent: int) -> None:
    """Start as the step's child (:func:`start_as_child`) and warm the parser up."""
    start_as_child(parent)
    # What the parser imports at its first page (URL handling, Resiliparse, numpy) is imported
    # now, before the worker counts as started, not while the step waits for the first chunk.
    # What a worker's start costs is measured by benchmarks/worker_start.py.
    parse_pages([(_WARM_URL, _WARM_PAGE, _WARM_URL, "text/html")], DEFAULT_ENGINE, main_content=True)


_MAIN_LOCK = threading.Lock()


WORKER_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}
"""Set for a worker where the environment does not say otherwise. numpy (SimHash) loads OpenBLAS,
which starts a thread per core that spins for a while: a large share of a worker start's CPU, for
linear algebra the parser never does (measured by ``benchmarks/worker_start.py``)."""


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A worker's process (a parse worker, the extraction's child): a new interpreter. ``spawn``
    also imports the parent's ``__main__`` module in the child: the daemon's module in a Dagster
    run forked by the platform's run launcher, the CLI in an engine crawl, each bringing Dagster
    or the whole engine into every worker. The worker needs none of it (it runs :func:`parse_pages`,
    or extraction), so the parent's ``__main__`` is hidden while the child starts. The child
    inherits this process's environment, with :data:`WORKER_ENVIRONMENT` added for the moment it
    starts."""

    def start(self) -> None:
        with _MAIN_LOCK:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            added = [name for name in WORKER_ENVIRONMENT if name not in os.environ]
            os.environ.update({name: WORKER_ENVIRONMENT[name] for name in added})
            try:
                super().start()
            finally:
                sys.modules["__main__"] = main
                for name in added:
                    os.environ.pop(name, None)


class WorkerContext(multiprocessing.context.SpawnContext):
    """``spawn`` for the engine's worker processes (parse workers, the extraction's child)."""

    Process = _WorkerProcess


class ParseWorkers:
    """``count`` parse processes, started here (before any fetch thread runs) and kept until
    :meth:`close`, for as many :class:`ParsePool` rounds as their owner runs. ``count`` is 0, and
    :attr:`fallback` says why, where this process cannot start children. Workers that died are
    started again at the next :meth:`renew`."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.fallback = ""  # why the pages are parsed in the owner's process although workers were asked for
        self._pool: ProcessPoolExecutor | None = None
        self._started: list[Future[int]] = []  # done once a worker has imported and warmed the parser
        self.renew()

    def renew(self) -> None:
        """Start the workers if there are none, or if one of them died (a round then starts whole)."""
        if self.count <= 0 or (self._pool is not None and not getattr(self._pool, "_broken", False)):
            return
        self.close()
        try:
            pool = ProcessPoolExecutor(self.count, mp_context=WorkerContext(),
                                       initializer=_worker_init, initargs=(os.getpid(),))
            # One submit starts one process while none is idle (none is before they import):
            # every worker starts now, on this thread, not later from a fetch thread. Nothing
            # waits for them; the first chunks queue until they have imported the parser.
            self._started = [pool.submit(int) for _ in range(self.count)]
        except (OSError, AssertionError, BrokenProcessPool) as err:  # e.g. a daemonic process may not have children
            self.fallback = f"parse workers unavailable ({type(err).__name__}: {err}); parsing in the step's process"
            self.count = 0
            return
        self._pool = pool

    @property
    def alive(self) -> bool:
        return self._pool is not None

    @property
    def ready(self) -> bool:
        """Whether a worker has started (a new interpreter importing the parser). Until then, a
        chunk handed over would wait for it."""
        return self._pool is not None and any(f.done() for f in self._started)

    def pids(self) -> list[int]:
        """The workers' process ids (tests kill one)."""
        processes = getattr(self._pool, "_processes", None) or {}
        return sorted(processes)

    def submit(self, chunk: list[Page], engine: ParserEngine, main_content: bool,
               max_links: int = MAX_LINKS_PER_PAGE) -> Future[Parsed] | None:
        """The chunk's parse in a worker; None when no worker takes it (parse it in this process)."""
        if self._pool is None:
            return None
        try:
            return self._pool.submit(parse_pages, chunk, engine, main_content, max_links)
        except (BrokenProcessPool, RuntimeError):  # a worker died: this chunk is parsed here
            return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def kill(self) -> None:
        """End the workers at once, for a process on its way out that waits for its children (a
        ``multiprocessing`` child joins them before Python's exit hooks would shut the pool down:
        idle workers then keep it waiting for ever). Nothing is waiting for them any more."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class ParsePool:
    """One round of parsing: HTML fetch results parsed by ``workers`` (a count, started for this
    pool alone, or a :class:`ParseWorkers` its owner keeps for many rounds; 0: in this process, at
    the end) as they arrive. Thread-safe :meth:`add`; call :meth:`parsed` once, then :meth:`close`."""

    def __init__(self, workers: int | ParseWorkers, engine: ParserEngine = DEFAULT_ENGINE, *, main_content: bool = True,
                 chunk_pages: int = CHUNK_PAGES, chunk_bytes: int = CHUNK_BYTES,
                 max_links: int = MAX_LINKS_PER_PAGE, max_unparsed: int = MAX_UNPARSED) -> None:
        self.engine = engine
        self.main_content = main_content
        self.max_links = max_links
        self.max_unparsed = max_unparsed  # 0: no limit
        self.chunk_pages = max(1, chunk_pages)
        self.chunk_bytes = chunk_bytes
        self._lock = threading.Lock()
        self._pending: list[Page] = []
        self._pending_bytes = 0
        self._submitted: list[tuple[list[Page], Future[Parsed] | None]] = []
        self._early: list[list[Page]] = []  # chunks that came before any worker had started
        self.parsed_here = 0  # pages this process parsed itself (set by parsed())
        self._owned = isinstance(workers, int)
        self._workers = ParseWorkers(workers) if isinstance(workers, int) else workers
        self._workers.renew()
        self.fallback = self._workers.fallback

    @property
    def workers(self) -> int:
        return self._workers.count if self._workers.alive else 0

    def add(self, result: FetchResult) -> None:
        """Queue one fetch result for parsing (non-HTML results are ignored); never raises."""
        if not result.is_html:
            return
        with self._lock:
            self._pending.append((result.url, result.body, result.final_url, result.content_type))
            self._pending_bytes += len(result.body)
            if not self._workers.alive or (len(self._pending) < self.chunk_pages
                                           and self._pending_bytes < self.chunk_bytes):
                return
            chunk = self._take()
        self._submit(chunk)
        self._hold_back()

    def _hold_back(self) -> None:
        """Wait, on the calling fetch thread, while more than ``max_unparsed`` pages handed to the
        workers are not parsed yet (at most ``HOLD_MAX_S``)."""
        if self.max_unparsed <= 0:
            return
        deadline = time.monotonic() + HOLD_MAX_S
        while time.monotonic() < deadline:
            with self._lock:
                running = [(c, f) for c, f in self._submitted if f is not None and not f.done()]
            if sum(len(chunk) for chunk, _f in running) <= self.max_unparsed:
                return
            wait([running[0][1]], timeout=min(1.0, max(0.0, deadline - time.monotonic())))

    def _take(self) -> list[Page]:
        chunk, self._pending, self._pending_bytes = self._pending, [], 0
        return chunk

    def _submit(self, chunk: list[Page]) -> None:
        """Hand the chunk to the workers, after the chunks kept while none had started yet; keep
        it too while none has."""
        with self._lock:
            if chunk:
                self._early.append(chunk)
            if not self._early or not self._workers.ready:
                return
            chunks, self._early = self._early, []
        for one in chunks:
            future = self._workers.submit(one, self.engine, self.main_content, self.max_links)
            with self._lock:
                self._submitted.append((one, future))

    def harvest(self, wait_s: float = 0.0) -> dict[str, ParsedPage]:
        """The parses that are ready, each handed out once (:meth:`parsed` then gives only the
        rest), for a caller that lands pages while the fetch goes on: the pages queued since the
        last chunk go to the workers now, and the chunks they finish within ``wait_s`` come back.
        Without workers (or before any has started) it parses the queued pages in the calling thread."""
        with self._lock:
            rest = self._take()
        out: dict[str, ParsedPage] = {}
        if not self._workers.alive:
            with self._lock:
                early, self._early = self._early, []
            for chunk in [*early, rest]:
                out.update(parse_pages(chunk, self.engine, self.main_content, self.max_links))
                self.parsed_here += len(chunk)
            return out
        self._submit(rest)
        if wait_s > 0:
            with self._lock:
                running = [f for _c, f in self._submitted if f is not None]
            wait(running, timeout=wait_s)
        with self._lock:
            done = [(c, f) for c, f in self._submitted if f is None or f.done()]
            self._submitted = [(c, f) for c, f in self._submitted if f is not None and not f.done()]
            early = [] if self._workers.ready else self._early
            if early:
                self._early = []
        for chunk, future in [*done, *((chunk, None) for chunk in early)]:
            out.update(self._finished(chunk, future))
        return out

    def _finished(self, chunk: list[Page], future: Future[Parsed] | None) -> Parsed:
        """The chunk's parse from its worker; parsed here when no worker took it or its worker died."""
        if future is not None:
            with contextlib.suppress(Exception):  # a dead worker: its chunk is parsed here
                return future.result()
        self.parsed_here += len(chunk)
        return parse_pages(chunk, self.engine, self.main_content, self.max_links)

    def parsed(self) -> dict[str, ParsedPage]:
        """Every added page's parse (but those :meth:`harvest` handed out), keyed by URL. This
        process is idle from here until the workers are done, so it parses too: the chunks no
        worker has taken yet, from the last one back (the workers take them from the first), and
        those that came before any worker had started (a small batch's pages then never wait for a
        worker's start). It waits for the rest, and parses here what a worker could not."""
        with self._lock:
            rest = self._take()
        self._submit(rest)  # with those kept, if a worker has started by now
        with self._lock:
            submitted, self._submitted = self._submitted, []
            early, self._early = self._early, []
        chunks = [*submitted, *((chunk, None) for chunk in early)]
        results: list[Parsed | None] = [None] * len(chunks)
        for index in reversed(range(len(chunks))):
            chunk, future = chunks[index]
            if future is None or future.cancel():  # cancel() fails once a worker has taken it
                results[index] = parse_pages(chunk, self.engine, self.main_content, self.max_links)
                self.parsed_here += len(chunk)
        out: dict[str, ParsedPage] = {}
        for (chunk, future), done_here in zip(chunks, results, strict=True):
            out.update(done_here if done_here is not None else self._finished(chunk, future))
        return out

    def close(self) -> None:
        """Ends the workers this pool started for itself; an owner's workers stay."""
        if self._owned:
            self._workers.close()

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
