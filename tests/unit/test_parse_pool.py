"""Parsing beside the fetch (crawl_platform.parse.pool): a fetch step's pages parsed in worker
processes while it fetches give exactly what parsing in the step gives, on a served site with broken
and non-HTML pages; a dead worker's pages are parsed in the step, nothing lost; the workers die
with the step's process, even when it is killed; they never import the step's ``__main__``; a
process that cannot start children parses inline; and a shard fetcher starts its workers once for
all its shards (a continuing run's levels), again only when they died."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchRequest, FetchResult
from crawl_platform.parse.html import parse_html
from crawl_platform.parse.pool import ParsePool, ParseWorkers
from crawl_platform.pipeline.shard import ShardFetcher
from tests.sites.hostile import Reply
from tests.unit.conftest import loopback_fetcher

REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> set[int]:
    """``pid``'s parse workers: its children that multiprocessing spawned (not its resource tracker)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == pid and b"spawn_main" in command:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _result(url: str, body: bytes, content_type: str = "text/html") -> FetchResult:
    return FetchResult(url=url, final_url=url, status=200, content_type=content_type, body=body,
                       error=None, fetched_at=datetime(2026, 12, 2), elapsed_ms=1.0)


def test_the_default_is_one_parse_worker_and_zero_turns_them_off(monkeypatch):
    assert Settings().parse_workers == 1
    monkeypatch.setenv("CRAWL_PARSE_WORKERS", "0")
    assert Settings().parse_workers == 0


def test_a_shard_parsed_by_workers_equals_the_shard_parsed_in_the_step(hostile):
    with DemoSite(n_pages=150, seed=3).serve() as server:
        urls = sorted(DemoSite(n_pages=150, seed=3).expected_urls(server.base_url))
        hostile.static["/broken"] = Reply(200, b"<html><body><p>Unclosed <a href='/x'>x<div><table><tr><td>",
                                          {"Content-Type": "text/html"})
        hostile.static["/data.json"] = Reply(200, b'{"not": "html"}', {"Content-Type": "application/json"})
        odd = [hostile.url("/broken"), hostile.url("/data.json")]
        requests = [FetchRequest(u) for u in [*urls, *odd]]
        inline = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=0).fetch(requests, [])
        beside = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=2)
        result = beside.fetch(requests, [])
    assert beside.fallback == ""
    assert len(result.results) == len(requests)
    html = {u for u, r in result.results.items() if r.is_html}
    assert set(result.parsed) == html
    assert odd[0] in html
    assert odd[1] not in html  # the JSON documents (the demo site has one too) are not parsed, in either way
    assert len(html) > 140
    assert result.parsed == inline.parsed
    assert list(result.parsed) == [u for u in result.results if u in result.parsed]  # the fetch's order
    assert result.parsed[odd[0]].links  # the broken page's link survives
    assert all(page.main is not None for page in result.parsed.values())


def test_pages_of_a_worker_that_died_are_parsed_in_the_step():
    pages = [_result(f"http://h.test/p{i}", f"<html><title>p{i}</title><body><a href='/q{i}'>q</a>"
                                            f"</body></html>".encode()) for i in range(40)]
    before = _children(os.getpid())
    with ParsePool(1, chunk_pages=4) as pool:
        (worker,) = _children(os.getpid()) - before
        for page in pages[:20]:
            pool.add(page)
        os.kill(worker, signal.SIGKILL)
        time.sleep(0.2)
        for page in pages[20:]:
            pool.add(page)
        parsed = pool.parsed()
    assert parsed == {p.url: parse_html(p.body, p.url, p.content_type) for p in pages}


def test_the_workers_die_with_the_step_process_even_when_it_is_killed():
    code = (f"import sys, time; sys.path.insert(0, {str(REPO)!r})\n"
            "from crawl_platform.parse.pool import ParsePool\n"
            "pool = ParsePool(2)\nprint('ready', flush=True)\ntime.sleep(60)\n")
    step = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert step.stdout is not None
        assert step.stdout.readline().strip() == "ready"
        workers = _children(step.pid)
        assert len(workers) == 2
        step.kill()
        step.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if _alive(w)]
    finally:
        step.kill()


def test_the_workers_do_not_import_the_step_process_main_module(tmp_path):
    """spawn imports the parent's ``__main__`` in each child unless it is hidden: in a Dagster run
    that is the daemon's module, which would bring Dagster into every worker."""
    imported = tmp_path / "imported"
    main = tmp_path / "step_main.py"
    main.write_text(f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
                    f"open({str(imported)!r}, 'a').write(__name__ + '\\n')\n"
                    "if __name__ == '__main__':\n"
                    "    from crawl_platform.parse.pool import ParseWorkers\n"
                    "    workers = ParseWorkers(2)\n"
                    "    page = ('http://h.test/', b'<html><title>T</title></html>', 'http://h.test/', 'text/html')\n"
                    "    futures = [workers.submit([page], 'lxml', True) for _ in range(4)]\n"
                    "    print(sorted({f.result()[0][1].title for f in futures}), len(workers.pids()))\n"
                    "    workers.close()\n")
    done = subprocess.run([sys.executable, str(main)], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["['T']", "2"]
    assert imported.read_text().split() == ["__main__"]  # not again as __mp_main__ in a worker


def test_a_process_that_cannot_start_workers_parses_in_the_step(monkeypatch):
    import multiprocessing.process  # noqa: PLC0415

    monkeypatch.setattr(multiprocessing.process.current_process(), "_config",
                        {**multiprocessing.process.current_process()._config, "daemon": True})
    with ParsePool(1) as pool:
        assert pool.workers == 0
        assert "parse workers unavailable" in pool.fallback
        pool.add(_result("http://h.test/a", b"<html><title>A</title></html>"))
        assert pool.parsed()["http://h.test/a"].title == "A"


@pytest.mark.parametrize("workers", [0, 1])
def test_non_html_results_are_not_parsed(workers):
    with ParsePool(workers) as pool:
        pool.add(_result("http://h.test/img", b"\x89PNG", "image/png"))
        assert pool.parsed() == {}


def test_a_shard_fetcher_starts_its_workers_once_for_every_shard_and_close_ends_them():
    site = DemoSite(n_pages=60, seed=5)
    before = _children(os.getpid())
    with site.serve() as server:
        urls = sorted(site.expected_urls(server.base_url))
        fetcher = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=2)
        try:
            first = fetcher.fetch([FetchRequest(u) for u in urls[:30]], [])
            workers = _children(os.getpid()) - before
            second = fetcher.fetch([FetchRequest(u) for u in urls[30:]], [])
            assert _children(os.getpid()) - before == workers  # the same two processes parsed both shards
        finally:
            fetcher.close()
    assert len(workers) == 2
    assert fetcher.fallback == ""
    assert {u for u, r in first.results.items() if r.is_html} == set(first.parsed)
    assert {u for u, r in second.results.items() if r.is_html} == set(second.parsed)
    assert len(first.parsed) + len(second.parsed) > 50
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)]


def test_lent_workers_parse_for_several_shard_fetchers_and_outlive_them():
    site = DemoSite(n_pages=40, seed=7)
    workers = ParseWorkers(2)
    pids = set(workers.pids())
    try:
        with site.serve() as server:
            urls = sorted(site.expected_urls(server.base_url))
            results = []
            for part in (urls[:20], urls[20:]):  # a run's fetch step, then a level it goes on to
                fetcher = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=2, workers=workers)
                try:
                    results.append(fetcher.fetch([FetchRequest(u) for u in part], []))
                finally:
                    fetcher.close()
                assert fetcher.fallback == ""
                assert set(workers.pids()) == pids
                assert all(_alive(p) for p in pids)  # closing the fetcher left the lender's workers running
            before = _children(os.getpid())
            again = fetcher.fetch([FetchRequest(u) for u in urls[:5]], [])  # after close(): workers of its own
            own = _children(os.getpid()) - before
            fetcher.close()
    finally:
        workers.close()
    assert len(pids) == 2
    assert len(own) == 2
    assert again.parsed
    assert not own & set(pids)
    for result in results:
        assert {u for u, r in result.results.items() if r.is_html} == set(result.parsed)
    assert sum(len(r.parsed) for r in results) > 30
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids | own) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids | own if _alive(p)]


def test_workers_that_died_between_shards_are_started_again_and_nothing_is_lost():
    pages = [_result(f"http://h.test/p{i}", f"<html><title>p{i}</title></html>".encode()) for i in range(20)]
    workers = ParseWorkers(1)
    try:
        (first,) = workers.pids()
        os.kill(first, signal.SIGKILL)
        time.sleep(0.2)
        with ParsePool(workers, chunk_pages=4) as pool:  # the round notices the dead worker and starts anew
            for page in pages:
                pool.add(page)
            parsed = pool.parsed()
        (second,) = workers.pids()
        assert second != first
        assert pool.fallback == ""
    finally:
        workers.close()
    assert parsed == {p.url: parse_html(p.body, p.url, p.content_type) for p in pages}


def test_pages_that_come_before_a_worker_started_are_parsed_in_the_step():
    """A small batch (a crawl's seed) does not wait half a second for a new interpreter."""
    workers = ParseWorkers(1)
    try:
        assert not workers.ready  # a spawned interpreter takes far longer than this line
        with ParsePool(workers) as pool:
            page = _result("http://h.example/seed", b"<title>Seed</title><a href='/next'>n</a>")
            pool.add(page)
            parsed = pool.parsed()
        assert parsed == {page.url: parse_html(page.body, page.url, "text/html")}
        assert pool.parsed_here == 1
        deadline = time.monotonic() + 60
        while not workers.ready and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers.ready  # the workers started all the same, for the next rounds
        assert workers.alive
    finally:
        workers.close()


def test_the_step_parses_the_chunks_no_worker_has_taken_and_nothing_is_parsed_twice():
    """Once the fetch is over, the step's process parses queued chunks from the last one back while
    the workers take them from the first: every page exactly once, as the step alone parses it."""
    body = b"<title>T</title>" + b"<p>word</p><a href='/x'>x</a>" * 2000  # a few ms of parsing each
    pages = [_result(f"http://h.example/p{i}", body + str(i).encode()) for i in range(60)]
    workers = ParseWorkers(1)
    try:
        deadline = time.monotonic() + 60
        while not workers.ready and time.monotonic() < deadline:
            time.sleep(0.05)
        with ParsePool(workers, chunk_pages=1) as pool:
            for page in pages:
                pool.add(page)
            parsed = pool.parsed()
        assert parsed == {p.url: parse_html(p.body, p.url, "text/html") for p in pages}
        assert 0 < pool.parsed_here < len(pages)  # both parsed: the step some, the worker the rest
    finally:
        workers.close()


def test_a_worker_counts_as_started_only_once_it_has_imported_what_its_first_page_needs():
    # The parser imports URL handling at its first page: time the step's first chunk used to wait
    # for. A started worker has done it already, and without what resolving links does not need
    # (the settings, tldextract and the requests it brings: 0.25 CPU s of every worker's start).
    workers = ParseWorkers(1)
    try:
        deadline = time.monotonic() + 30
        while not workers.ready and time.monotonic() < deadline:
            time.sleep(0.01)
        assert workers.ready
        imported = workers._pool.submit(
            eval, "[m for m in ('crawl_platform.urls', 'crawl_platform.config', 'pydantic_settings', 'tldextract',"
                  " 'requests') if m in __import__('sys').modules]")
        assert imported.result(timeout=30) == ["crawl_platform.urls"]
    finally:
        workers.close()


@pytest.mark.parametrize("ours", [None, "3"])
def test_a_worker_starts_no_openblas_threads_unless_the_environment_asks_for_them(monkeypatch, ours):
    # numpy's OpenBLAS starts a spinning thread per core at import: 0.12 CPU s of a worker's start.
    if ours is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", ours)
    workers = ParseWorkers(1)
    try:
        seen = workers._pool.submit(os.getenv, "OPENBLAS_NUM_THREADS")
        # the worker has imported numpy (the parser's SimHash) before it takes any work
        threads = workers._pool.submit(eval, "'numpy' in __import__('sys').modules and "
                                             "len(__import__('os').listdir('/proc/self/task'))")
        assert seen.result(timeout=30) == (ours or "1")
        assert threads.result(timeout=30) == 1 if ours is None else threads.result(timeout=30) > 1
    finally:
        workers.close()
    assert os.getenv("OPENBLAS_NUM_THREADS") == ours  # this process's environment is as it was


def test_a_shard_smaller_than_parse_workers_from_is_parsed_in_the_step_and_a_larger_one_starts_them():
    site = DemoSite(n_pages=60, seed=5)
    before = _children(os.getpid())
    with site.serve() as server:
        urls = sorted(site.expected_urls(server.base_url))
        fetcher = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=1, workers_from=20)
        try:
            seeds = fetcher.fetch([FetchRequest(u) for u in urls[:5]], [])  # a crawl's seeds, say
            assert _children(os.getpid()) - before == set()  # no worker for five pages
            level = fetcher.fetch([FetchRequest(u) for u in urls[5:]], [])
            assert len(_children(os.getpid()) - before) == 1
            inline = ShardFetcher(loopback_fetcher(), "lxml", None, parse_workers=0)
            assert seeds.parsed == inline.fetch([FetchRequest(u) for u in urls[:5]], []).parsed
        finally:
            fetcher.close()
    assert {u for u, r in level.results.items() if r.is_html} == set(level.parsed)


@pytest.mark.parametrize("workers", [0, 1])
def test_one_page_the_parser_fails_on_never_costs_the_others_their_parse(workers):
    """Among ordinary pages: one declaring a charset whose codec cannot decode with replacement,
    one of 300 links (the cap reaches the workers), and one the parser fails on (a body that is no
    bytes stands for any failure). Every page is parsed, the failing one with its error."""
    ordinary = [_result(f"http://h.test/p{i}", f"<html><title>p{i}</title><body>p{i}</body></html>".encode())
                for i in range(30)]
    idna = _result("http://h.test/idna", "<title>café</title>".encode(), "text/html; charset=idna")
    links = _result("http://h.test/links", "".join(f"<a href=/l{i}>{i}</a>" for i in range(300)).encode())
    failing = _result("http://h.test/failing", "<title>no bytes</title>")  # type: ignore[arg-type]
    with ParsePool(workers, chunk_pages=4, max_links=100) as pool:
        if workers:
            while not pool._workers.ready:  # the chunks must go to the worker
                time.sleep(0.05)
        for page in [*ordinary[:15], idna, failing, links, *ordinary[15:]]:
            pool.add(page)
        parsed = pool.parsed()
    assert {url: page.title for url, page in parsed.items() if url.startswith("http://h.test/p")} == {
        p.url: p.url.rsplit("/", 1)[1] for p in ordinary}
    assert (parsed["http://h.test/idna"].title, parsed["http://h.test/idna"].charset) == ("café", "utf-8")
    assert (len(parsed["http://h.test/links"].links), parsed["http://h.test/links"].links_truncated) == (100, True)
    assert parsed["http://h.test/failing"].error == \
        "TypeError: startswith first arg must be str or a tuple of str, not bytes"
    assert [url for url, page in parsed.items() if page.error] == ["http://h.test/failing"]
