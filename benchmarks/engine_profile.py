"""Where the engine's own time goes inside a crawl, sampled with py-spy (`compare.py --py-spy`).

Runs the engine-only crawl (`crawlers.py engine`) once more under `py-spy record --idle --threads`
against the same site, on a fresh broker and DuckDB file, and gives each sample of the *main*
thread (the one driving the batches; the fetch workers are threads it waits on) to the innermost
engine step on its stack: reading the batch from Kafka, the per-batch DuckDB reads, fetching,
parsing, landing, admitting links, publishing them, and polling watermarks. With `--idle` the
samples are wall time, so the split adds up to the crawl's duration. This run is not one of the
measured ones: py-spy slows its target a little.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from crawlers import platform_settings
from static_site import ServedSite

from crawl_platform.bus.broker import EmbeddedBroker

RATE_HZ = 250
# (function, file) -> step; the innermost match on a stack wins.
STEPS = {
    ("read_range", "kafka.py"): "read batch from Kafka",
    ("_fetch_requests", "batch.py"): "per-batch DuckDB reads (crawls, validators, hosts)",
    ("done_urls", "read_model.py"): "per-batch DuckDB reads (already done)",
    ("known_crawls", "read_model.py"): "per-batch DuckDB reads (crawls)",
    ("fetch_all", "fetcher.py"): "fetch (waiting on the fetch worker)",
    ("parse_html", "html.py"): "parse",
    ("land_batch", "landing.py"): "land (one DuckDB transaction)",
    ("expand", "admission.py"): "frontier: select links, close items (DuckDB)",
    ("_admit", "admission.py"): "frontier: dedup and insert new URLs (DuckDB)",
    ("publish", "publisher.py"): "frontier: publish new URLs to Kafka",
    ("republish_stale", "publisher.py"): "frontier: stale-URL scan (DuckDB)",
    ("plan_batches", "offsets.py"): "plan batches (watermarks)",
    ("watermarks", "kafka.py"): "plan batches (watermarks)",
    ("register", "intake.py"): "seed intake",
    ("_find_and_load", "<frozen importlib._bootstrap>"): "interpreter start-up and imports",
}


def _step(stack: list[str]) -> str:
    found = "other"
    for frame in stack:
        qualified, _, where = frame.partition(" (")
        name = qualified.rsplit(".", 1)[-1]  # py-spy writes Class.method
        file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
        step = STEPS.get((name, file))
        if step is not None:
            found = step
            if step.startswith("interpreter"):
                return step  # an import anywhere below module level is start-up
    return found


def profile_engine(site: ServedSite, workdir: Path, batch_size: int, host_delay_ms: int,
                   timeout_s: float = 900.0) -> dict[str, float]:
    """Seconds of the main thread per engine step, or {} when py-spy is not installed."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        return {}
    workdir.mkdir(parents=True)
    raw = workdir / "py-spy.txt"
    with EmbeddedBroker(port=0) as broker:
        settings = platform_settings(workdir, broker.bootstrap_servers, batch_size, host_delay_ms)
        argv = [py_spy, "record", "--idle", "--threads", "--format", "raw", "-r", str(RATE_HZ), "-o", str(raw),
                "--", sys.executable, str(HERE / "crawlers.py"), "engine", site.seed]
        with (workdir / "py-spy.log").open("wb") as log:
            subprocess.run(argv, env={**os.environ, **settings.to_env()}, stdout=log, stderr=subprocess.STDOUT,
                           timeout=timeout_s, check=False)
    if not raw.exists():
        return {}
    threads: dict[str, int] = collections.Counter()
    per_thread: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        frames = stack_text.split(";")
        if not frames or not count.isdigit():
            continue
        threads[frames[0]] += int(count)
        per_thread[frames[0]][_step(frames[1:])] += int(count)
    if not threads:
        return {}
    main = next((t for t in threads if "MainThread" in t), max(threads, key=threads.__getitem__))
    return {step: n / RATE_HZ for step, n in sorted(per_thread[main].items(), key=lambda kv: -kv[1])}
