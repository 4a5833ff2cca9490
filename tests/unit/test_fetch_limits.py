"""The fetcher's bounds against a hostile server: total deadline, body cap, decompression-bomb cap,
content-type allow-list (crawl_platform.fetch.fetcher, .transport, .deadlines)."""

from __future__ import annotations

import threading
import time
import tracemalloc

from crawl_platform.fetch.fetcher import Fetcher, FetchResult
from tests.sites.hostile import PDF_BYTES, Exchange, Reply, gzip_bomb
from tests.unit.conftest import loopback_fetcher

MiB = 1024 * 1024


def _fetch_within(fetcher: Fetcher, url: str, seconds: float) -> tuple[FetchResult, float]:
    """Fetch on a thread so that a missing bound fails the test in ``seconds``, not in minutes."""
    box: list[FetchResult] = []
    started = time.monotonic()
    worker = threading.Thread(target=lambda: box.append(fetcher.fetch(url)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"fetch of {url} still running after {seconds}s"
    return box[0], time.monotonic() - started


def test_a_body_trickled_at_one_byte_per_second_is_cut_off_at_the_deadline(hostile):
    # 600 bytes at 1 byte/s: every read returns within the 5 s read timeout, so only a total
    # deadline stops it.
    result, took = _fetch_within(loopback_fetcher(deadline_s=1.0), hostile.url("/trickle"), 8.0)
    assert result.status is None
    assert result.error == "deadline exceeded: no complete response within 1s"
    assert result.body == b""
    assert 1.0 <= took < 2.0
    (seen,) = hostile.seen("/trickle")
    assert seen.bytes_sent <= 3


def test_headers_trickled_line_by_line_are_cut_off_at_the_deadline(hostile):
    result, took = _fetch_within(loopback_fetcher(deadline_s=1.0), hostile.url("/trickle-headers?interval=0.3"), 8.0)
    assert result.status is None
    assert result.error == "deadline exceeded: no complete response within 1s"
    assert 1.0 <= took < 2.0


def test_a_fast_page_is_unaffected_by_the_deadline(hostile):
    fetcher = loopback_fetcher(deadline_s=1.0)
    results = [fetcher.fetch(hostile.url(f"/page/{k}")) for k in range(5)]
    assert [r.status for r in results] == [200] * 5
    time.sleep(1.2)  # past every earlier deadline: a kept-alive connection must not be cut
    assert fetcher.fetch(hostile.url("/page/9")).status == 200


def test_an_endless_body_is_cut_off_at_the_cap_while_streaming(hostile):
    result, _ = _fetch_within(loopback_fetcher(max_body_bytes=256 * 1024), hostile.url("/huge"), 8.0)
    assert result.status is None
    assert result.error == "body larger than 262144 bytes"
    assert result.body == b""
    hostile.settle()
    (seen,) = hostile.seen("/huge")
    assert seen.bytes_sent < 64 * MiB  # the server was stopped early, not drained


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(hostile):
    hostile.static["/big"] = Reply(200, b"<p>" + b"x" * (2 * MiB) + b"</p>")
    result = loopback_fetcher(max_body_bytes=MiB).fetch(hostile.url("/big"))
    assert result.status is None
    assert result.error == f"body larger than {MiB} bytes (Content-Length {2 * MiB + 7})"


def test_a_gzip_bomb_is_cut_off_by_its_decoded_size_while_streaming(hostile):
    bomb = gzip_bomb()  # built before measuring: the server's copy is not the fetcher's memory
    assert len(bomb) < MiB  # on the wire it fits the cap; only its decoded size gives it away
    tracemalloc.start()
    try:
        result = loopback_fetcher(max_body_bytes=MiB).fetch(hostile.url("/gzip-bomb"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status is None
    assert result.error == f"body larger than {MiB} bytes"
    assert peak < 16 * MiB  # the 64 MiB it expands to was never held


def test_a_type_off_the_allow_list_lands_without_its_body_being_read(hostile):
    result = loopback_fetcher().fetch(hostile.url("/pdf"))
    assert (result.status, result.content_type, result.error) == (200, "application/pdf", None)
    assert result.body == b""
    assert not result.is_html
    hostile.settle()
    (seen,) = hostile.seen("/pdf")
    assert seen.bytes_sent < PDF_BYTES // 2  # we hung up after the headers


def test_the_allow_list_is_configurable(hostile):
    hostile.static["/doc.txt"] = Reply(200, b"plain words", {"Content-Type": "text/plain"})
    default = loopback_fetcher().fetch(hostile.url("/doc.txt"))
    widened = loopback_fetcher(content_types=["text/html", "text/plain"]).fetch(hostile.url("/doc.txt"))
    assert (default.status, default.body) == (200, b"")
    assert (widened.status, widened.body) == (200, b"plain words")
    assert not widened.is_html  # read, but not parsed as HTML


def test_a_page_without_content_type_is_sniffed(hostile):
    hostile.routes["/bare"] = lambda ex: _bare(ex, b"<!DOCTYPE html><title>Bare</title>")
    result = loopback_fetcher().fetch(hostile.url("/bare"))
    assert result.content_type is None
    assert result.is_html


def _bare(ex: Exchange, body: bytes) -> None:
    ex.start(200, {"Content-Length": str(len(body))})  # no Content-Type at all
    ex.write(body)
