"""Cost per page of the raw archive: writing a shard's WARC file on the crawl path, and reading it back.

Takes ``--pages`` article pages of the crawl benchmark's generated site (``static_site.py``,
about 3 KiB each; ``--kb`` grows them with more of the same kind of text), as fetch results
with their request and response headers, then times
:func:`crawl_platform.archive.writer.archive_results` (the whole file: warcinfo, a request and a
response record per page, each its own gzip member, fsync and rename), :func:`read_response` per
page (opening the file each time), and :func:`archived_responses` over the landed pages (one
open per file, seek per record), and prints ms per page and the archive's size against the
bodies'. The write is also timed at other gzip levels for comparison:

    .venv/bin/python benchmarks/archive_cost.py
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from static_site import _WORDS, StaticSite, _render, article

from crawl_platform.archive import writer
from crawl_platform.archive.reader import archived_responses, read_response
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.fetch.fetcher import FetchResult
from crawl_platform.fetch.transport import Exchange
from crawl_platform.pipeline.landing import land_batch
from crawl_platform.storage import LocalFolder
from crawl_platform.store.database import CrawlStore

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pages", type=int, default=5000)
parser.add_argument("--kb", type=int, default=0, help="grow each page to about this many KiB (0: as generated)")
parser.add_argument("--repeats", type=int, default=3)
args = parser.parse_args()

rng = random.Random(7)
SITE = StaticSite(args.pages)


def page(i: int) -> bytes:
    """The crawl benchmark's article page ``i``, grown to ``--kb`` KiB with more of its kind of text."""
    body = _render(SITE.pages[article(i)])
    extra = []
    size = len(body)
    while size < args.kb * 1024:
        sentence = " ".join(rng.choices(_WORDS, k=rng.randint(6, 14))).capitalize() + "."
        extra.append(sentence)
        size += len(sentence) + 1
    return body.replace(b"</article>", f"<p>{' '.join(extra)}</p></article>".encode()) if extra else body


def result(i: int, body: bytes) -> FetchResult:
    url = f"http://bench.test/p/{i}"
    exchange = Exchange(f"GET /p/{i} HTTP/1.1", (("Host", "bench.test"), ("User-Agent", "crawl-platform/0.1"),
                                                  ("Accept-Encoding", "gzip, deflate"), ("Accept", "text/html")),
                        "HTTP/1.1 200 OK", (("Server", "nginx"), ("Date", "Tue, 01 Dec 2026 18:00:00 GMT"),
                                            ("Content-Type", "text/html; charset=utf-8"),
                                            ("Content-Length", str(len(body))), ("ETag", f'"{i:x}"')))
    return FetchResult(url, url, 200, "text/html; charset=utf-8", body, None,
                       datetime.now(UTC).replace(tzinfo=None), 5.0, exchange=exchange)


results = [result(i, page(i)) for i in range(args.pages)]
SHIPPED = writer.COMPRESSION_LEVEL
body_bytes = sum(len(r.body) for r in results)
print(f"{args.pages} pages, {body_bytes / args.pages / 1024:.1f} KiB per body on average")
clock = time.perf_counter()
for r in results:
    zlib.compress(r.body, 6)
print(f"for scale, zlib level 6 of the bodies alone: {(time.perf_counter() - clock) * 1000 / args.pages:.3f} ms/page")

with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp) / "archive"

    def write(level: int) -> tuple[float, dict, int]:
        writer.COMPRESSION_LEVEL = level
        times = []
        for _ in range(args.repeats):
            name = writer.shard_file_name("bench", "s0")
            clock = time.perf_counter()
            pointers, _failed = writer.archive_results(LocalFolder(root), name, results, {"isPartOf": "bench"})
            times.append(time.perf_counter() - clock)
        return statistics.median(times), pointers, (root / name).stat().st_size

    for level in sorted({1, 3, 6, 9} - {SHIPPED}):
        level_s, _, level_size = write(level)
        print(f"write at level {level}: {level_s * 1000 / args.pages:.3f} ms/page, "
              f"archive {level_size / body_bytes:.1%} of the bodies")
    seconds, pointers, size = write(SHIPPED)
    print(f"write at level {SHIPPED} (shipped): {seconds * 1000 / args.pages:.3f} ms/page "
          f"({seconds:.2f} s per {args.pages}-page shard), archive {size / body_bytes:.1%} of the bodies")

    clock = time.perf_counter()
    for r in results:
        p = pointers[r.url]
        _headers, body = read_response(LocalFolder(root), p.warc_file, p.offset, p.length)
        assert body == r.body
    one_by_one = time.perf_counter() - clock
    print(f"read_response (open, seek, parse per page): {one_by_one * 1000 / args.pages:.3f} ms/page")

    store = CrawlStore.from_settings(Settings(lake_path=Path(tmp) / "lake", archive_path=str(root)))
    items = [FrontierURL("bench", r.url, 0) for r in results]
    land_batch(store, "bench", items, {r.url: r for r in results}, {}, (), pointers)
    times = []
    for _ in range(args.repeats):
        clock = time.perf_counter()
        count = sum(1 for _ in archived_responses(store, "bench"))
        times.append(time.perf_counter() - clock)
    assert count == args.pages
    streamed = statistics.median(times)
    print(f"archived_responses (query, one open per file, seek per record): {streamed * 1000 / args.pages:.3f} "
          f"ms/page ({args.pages / streamed:.0f} pages/s)")
    store.close()
