"""Where the machine's CPU goes, by kind of process, while something else runs (docs/benchmarks.md).

Samples every process's own CPU (utime + stime in ``/proc/PID/stat``) every ``--interval`` seconds
and keeps the last figure seen for each process, so a process that exits between two samples
keeps what it used up to the last one. At the end it prints the CPU seconds of each kind of
process (the broker, the daemon, the code server, run workers, step workers, forked children of
either, the compute-log tailers and their watchers, PostgreSQL backends, nginx, Scrapy...), and
the machine's busy CPU from ``/proc/stat`` over the same time: the difference is what processes
shorter than one interval used.

It looks at the whole machine, so it works beside any checkout of the platform:

    .venv/bin/python benchmarks/cpu_by_kind.py --seconds 600 --json cpu.json &
    .venv/bin/python benchmarks/compare.py --pages 20000 --scrapy-concurrency 1

It stops at ``--seconds`` or on SIGINT/SIGTERM, and prints then. With ``--during TEXT`` it waits for a
process whose command line holds TEXT and counts only while that process runs.

With ``--memory`` it also reads each new process's PSS (``/proc/PID/smaps_rollup``) every
``--memory-interval`` seconds (2) and prints the platform's memory at its peak, by kind and by process.
"The platform" is every process started after the sampler but the ones that are not the
platform's (nginx, Scrapy, PostgreSQL's and Redis's, the benchmark, this sampler), as
``compare.py``'s peak PSS counts it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from measure import _memory, machine_cpu_s

TICK = os.sysconf("SC_CLK_TCK")

# programs known by name (the basename of argv[0], or how PostgreSQL renames its backends)
PROGRAMS: dict[str, str] = {
    "tansu": "broker (tansu)", "nginx": "nginx", "postgres": "postgres", "redis-server": "redis",
    "beam.smp": "rabbitmq", "scrapy": "scrapy", "tail": "log tail",
}
# then (substring of the command line, kind), the first match winning: a run worker's command line
# holds its instance's PostgreSQL address, so these come after the program names
KINDS: tuple[tuple[str, str], ...] = (
    ("dagster-daemon", "daemon"),
    ("dagster_daemon", "daemon"),
    ("crawl_platform_dagster.daemon", "daemon"),
    ("compare.py", "benchmark"),
    ("cpu_by_kind.py", "this sampler"),
    ("api grpc", "code server"),
    ("execute_run", "run worker"),
    ("execute_step", "step worker"),
    ("forkserver", "fork server"),
    ("watch_orphans", "log watcher"),
    ("crawl_platform_dagster.cli", "crawl CLI"),
    ("crawl_platform.cli", "crawl CLI"),
    ("scrapy", "scrapy"),
)


NOT_PLATFORM = {"nginx", "postgres", "redis", "rabbitmq", "scrapy", "benchmark", "this sampler", "log tail"}


@dataclass
class Seen:
    kind: str
    cpu_s: float  # own CPU at the last sample
    depth: int  # 0, or how many forks down from the first process of its command line
    pid: int = 0


def _read(pid: str) -> tuple[int, int, float, str] | None:
    """(ppid, start time, own CPU seconds, command line) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()
    if not cmd:
        cmd = raw[raw.index(b"(") + 1:raw.rindex(b")")].decode(errors="replace")
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / TICK, cmd


def kind_of(cmd: str) -> str:
    program = cmd.split(" ", 1)[0].rsplit("/", 1)[-1].rstrip(":")
    for name, kind in PROGRAMS.items():
        if program == name or program.startswith(name + "-"):
            return kind
    for needle, kind in KINDS:
        if needle in cmd:
            return kind
    return "other: " + cmd.split(" ", 1)[0].rsplit("/", 1)[-1][:30]


def sample(seen: dict[tuple[int, int], Seen], examples: dict[str, str]) -> None:
    """One pass over /proc, keyed by (pid, start time); a forked process
    (same command line as its parent) is named after the first process of its line with its depth,
    and `examples` keeps one command line per kind."""
    rows: dict[int, tuple[int, int, float, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            row = _read(name)
            if row is not None:
                rows[int(name)] = row
    for pid, (ppid, start, cpu, cmd) in sorted(rows.items()):  # a parent's pid is lower, but for wrap-around
        key = (pid, start)
        if key in seen:
            seen[key].cpu_s = cpu
            continue
        kind, depth = kind_of(cmd), 0
        parent = rows.get(ppid)
        if parent is not None and parent[3] == cmd:  # a fork: same command line as its parent
            parent_seen = seen.get((ppid, parent[1]))
            depth = parent_seen.depth + 1 if parent_seen else 1
            kind += f" (fork depth {depth})"
        examples.setdefault(kind, cmd[:160])
        seen[key] = Seen(kind, cpu, depth, pid)


@dataclass
class MemoryPeak:
    """The platform's summed PSS at its highest memory sample, by kind and by process."""

    total: int = 0
    by_kind: dict[str, int] | None = None
    by_process: list[tuple[int, str, int]] | None = None  # (pid, kind, PSS bytes)
    samples: int = 0

    def sample(self, seen: dict[tuple[int, int], Seen], base: dict[tuple[int, int], float]) -> None:
        rows = [(entry.pid, entry.kind, _memory(entry.pid)[1]) for key, entry in seen.items()
                if key not in base and entry.kind.split(" (")[0] not in NOT_PLATFORM]
        rows = [row for row in rows if row[2]]  # gone since the CPU pass
        self.samples += 1
        total = sum(row[2] for row in rows)
        if total > self.total:
            by_kind: dict[str, int] = collections.defaultdict(int)
            for _, kind, pss in rows:
                by_kind[kind] += pss
            self.total, self.by_kind, self.by_process = total, dict(by_kind), sorted(rows, key=lambda r: -r[2])

    def report(self) -> None:
        mb = 1024 * 1024
        print(f"platform peak PSS {self.total / mb:.0f} MB ({self.samples} memory samples); by kind at the peak:")
        for kind, pss in sorted((self.by_kind or {}).items(), key=lambda item: -item[1]):
            print(f"  {kind:<34} {pss / mb:8.0f} MB")
        print("  the largest processes then:", ", ".join(
            f"{pid} {kind} {pss / mb:.0f}" for pid, kind, pss in (self.by_process or [])[:10]))


def _wait_for(text: str, seconds: float, stopped: Callable[[], bool]) -> int | None:
    """The pid of the first process whose command line holds ``text``, polled every 10 ms."""
    deadline = time.monotonic() + seconds
    while not stopped() and time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            if name.isdigit() and name != str(os.getpid()):
                row = _read(name)
                if row is not None and text in row[3]:
                    return int(name)
        time.sleep(0.01)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long (3600)")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples (0.25)")
    parser.add_argument("--verbose", action="store_true", help="print an example command line per kind")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--memory", action="store_true", help="also the platform's peak PSS, by kind and process")
    parser.add_argument("--memory-interval", type=float, default=2.0, help="seconds between memory samples (2)")
    parser.add_argument("--during", metavar="TEXT",
                        help="count only while a process whose command line holds TEXT runs: wait for it, "
                        "stop when it exits (e.g. 'cli.main crawl', the seed-to-done window compare.py times)")
    args = parser.parse_args()
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    seen: dict[tuple[int, int], Seen] = {}
    examples: dict[str, str] = {}
    watched = _wait_for(args.during, args.seconds, lambda: stop) if args.during else None
    sample(seen, examples)
    base = {key: v.cpu_s for key, v in seen.items()}  # what the processes alive now had used already
    busy0, t0 = machine_cpu_s(), time.monotonic()
    memory, next_memory = MemoryPeak(), t0
    while not stop and time.monotonic() - t0 < args.seconds:
        if watched is not None and not os.path.exists(f"/proc/{watched}"):
            break
        time.sleep(args.interval)
        sample(seen, examples)
        if args.memory and time.monotonic() >= next_memory:
            memory.sample(seen, base)
            next_memory = time.monotonic() + args.memory_interval
    busy, wall = machine_cpu_s() - busy0, time.monotonic() - t0
    by_kind: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for key, entry in seen.items():
        used = entry.cpu_s - base.get(key, 0.0)
        if used > 0 or key not in base:
            by_kind[entry.kind] += used
            counts[entry.kind] += key not in base
    attributed = sum(by_kind.values())
    print(f"{wall:.1f} s wall, machine busy {busy:.1f} CPU s, attributed {attributed:.1f} s, "
          f"in processes shorter than {args.interval} s: {busy - attributed:.1f} s")
    for kind, cpu in sorted(by_kind.items(), key=lambda item: -item[1]):
        if cpu >= 0.05:
            print(f"  {kind:<34} {cpu:8.1f} s  {100 * cpu / busy if busy else 0:5.1f} %   ({counts[kind]} started)")
            if args.verbose:
                print(f"      e.g. {examples.get(kind, '')}")
    if args.memory:
        memory.report()
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "busy_s": busy, "by_kind": dict(by_kind),
                                         "started": dict(counts), "examples": examples,
                                         "peak_pss": memory.total, "peak_pss_by_kind": memory.by_kind,
                                         "peak_pss_by_process": memory.by_process}, indent=1))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
