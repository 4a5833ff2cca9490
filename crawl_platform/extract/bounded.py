"""Extraction in a child process, each page within a deadline: a slow selector is one page's error.

A crawl's XPath and CSS selectors come from whoever submitted it, and they cannot be made linear:
``//*[count(//*) > 0]`` costs the square of a page's elements, and lxml evaluates it in C, with
no way to stop it from Python. :class:`BoundedExtractor` hands each page to a child process (a
new interpreter from :class:`~crawl_platform.parse.pool.WorkerContext`, which ends with its parent)
running :class:`~crawl_platform.extract.engine.Extractor`, and waits at most ``page_seconds``: a page
that takes longer ends the child and becomes that page's error, a child that dies (out of
memory, a crash in C) too, and the next page starts a new child. The other pages, and other
crawls' extractions, go on. Where no child can start (a daemonic process), pages are extracted in
this process without the bound, and :attr:`BoundedExtractor.fallback` says why.
:mod:`crawl_platform.extract.run` drives it.
"""

from __future__ import annotations

import contextlib
import os
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType

from crawl_platform.extract.engine import Extractor, PageBody, PageExtraction, Response
from crawl_platform.extract.rules import ExtractionRules
from crawl_platform.parse.pool import WorkerContext, start_as_child

PAGE_SECONDS = 10.0
"""Longest one page's extraction may take; a slower one is stopped and recorded as its error."""
START_SECONDS = 60.0  # for a new interpreter to import the extraction engine, on a loaded machine too


def _serve(conn: Connection, rules: ExtractionRules, parent: int) -> None:
    """The child: extract each page it is sent and send the result back, until told to stop."""
    start_as_child(parent)
    extractor = Extractor(rules)
    conn.send("ready")
    while True:
        try:
            page = conn.recv()
        except EOFError:
            return
        if page is None:
            return
        conn.send(extractor.extract(page))


class BoundedExtractor:
    """:meth:`extract` as :class:`~crawl_platform.extract.engine.Extractor` does, each page within
    ``page_seconds``; the child starts at the first page. Not thread-safe; :meth:`close` when done."""

    def __init__(self, rules: ExtractionRules, page_seconds: float = PAGE_SECONDS) -> None:
        self.rules = rules
        self.page_seconds = page_seconds
        self.fallback = ""  # why pages are extracted in this process, without the bound
        self._local: Extractor | None = None
        self._child: BaseProcess | None = None
        self._conn: Connection | None = None

    def extract(self, response: Response) -> PageExtraction:
        """The page's records, or its error; never raises."""
        url, version = response.url, response.version
        conn = self._connection()
        if conn is None:
            if self._local is None:
                self._local = Extractor(self.rules)
            return self._local.extract(response)
        page = PageBody(url, version, response.body, response.content_type, response.final_url)
        try:
            conn.send(page)
            if conn.poll(self.page_seconds):
                result: PageExtraction = conn.recv()
                return result
        except (OSError, EOFError):  # the child died with the page
            child = self._child
            self._stop(wait=1.0)
            code = child.exitcode if child is not None else None
            return PageExtraction(url, version, (), f"extraction failed: its process died (exit code {code})")
        self._stop()
        return PageExtraction(url, version, (), f"extraction stopped after {self.page_seconds:g} s: "
                              "a selector too slow for this page")

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (tests kill it)."""
        return self._child.pid if self._child is not None else None

    def close(self) -> None:
        """End the child (it is waiting for a page, so at once)."""
        if self._conn is not None:
            with contextlib.suppress(OSError):  # the child died already
                self._conn.send(None)
        self._stop(wait=1.0)

    def __enter__(self) -> BoundedExtractor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _connection(self) -> Connection | None:
        """The running child's end of the pipe, starting one if there is none; None when no child
        can start here (then :attr:`fallback` says why)."""
        if self._conn is not None or self.fallback:
            return self._conn
        context = WorkerContext()
        ours, theirs = context.Pipe()
        try:
            child = context.Process(target=_serve, args=(theirs, self.rules, os.getpid()), daemon=True)
            child.start()
        except (OSError, AssertionError) as err:  # e.g. a daemonic process may not have children
            self.fallback = f"no extraction process ({type(err).__name__}: {err}): extracting without a time bound"
            return None
        theirs.close()
        self._child, self._conn = child, ours
        try:
            if ours.poll(START_SECONDS) and ours.recv() == "ready":
                return ours
        except (OSError, EOFError):
            pass
        code = child.exitcode
        self._stop()
        self.fallback = (f"the extraction process did not start (exit code {code}): "
                         "extracting without a time bound")
        return None

    def _stop(self, wait: float = 0.0) -> None:
        child, conn = self._child, self._conn
        self._child = self._conn = None
        if child is not None:
            child.join(wait)
            if child.is_alive():
                child.kill()
                child.join()
        if conn is not None:
            conn.close()
