"""Resource accounting for the benchmark's crawlers: CPU seconds, peak memory, load average.

The crawler under test is always a set of processes that this benchmark started (the embedded
broker, the Dagster daemon and everything it spawns, the CLI, the Scrapy process), one crawler at a
time, next to the web server, which is excluded. So:

- **CPU** is `getrusage(RUSAGE_CHILDREN)` of this process, before the crawler starts and after
  every process of it has exited and been reaped. This process is made a *child subreaper*, so a
  grandchild whose parent dies first (a Dagster run worker, say) is re-parented here rather than to
  init and its CPU is not lost. :class:`CpuWindow` adds a per-interval figure from `/proc`
  (utime+stime+cutime+cstime of every live descendant, plus reaped children), used for the
  seed-to-done window that excludes start-up.
- **Memory** is the sum of RSS (and of PSS, which counts shared pages once) over the live
  descendants, sampled by :class:`TreeSampler` (RSS every 0.5 s, PSS every 2 s); the peak is
  reported.

Linux only (`/proc`, `prctl`). Every loop here is bounded.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import threading
import time
from dataclasses import dataclass, field

PR_SET_CHILD_SUBREAPER = 36
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def become_subreaper() -> bool:
    """Orphaned descendants get re-parented to this process (so their CPU is counted here)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    return False


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / _TICKS


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, utime+stime+cutime+cstime in seconds) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()  # comm may hold spaces and parentheses
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICKS


def descendants(exclude: set[int]) -> dict[int, float]:
    """Live (and zombie) descendants of this process, minus the subtrees rooted at `exclude`:
    pid -> CPU seconds (own plus reaped children)."""
    stats: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                stats[int(name)] = st
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    found: dict[int, float] = {}
    stack = [p for p in kids.get(os.getpid(), []) if p not in exclude]
    while stack and len(found) < 100_000:
        pid = stack.pop()
        found[pid] = stats[pid][1]
        stack.extend(p for p in kids.get(pid, []) if p not in exclude)
    return found


def _memory(pid: int, pss_too: bool = True) -> tuple[int, int]:
    """(RSS, PSS) bytes of one process; zeros if it is gone (PSS zero unless ``pss_too``: the
    kernel walks the process's page tables for it, a few ms for a few hundred MB)."""
    rss = pss = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * _PAGE
        if not pss_too:
            return rss, pss
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                    break
    return rss, pss


@dataclass
class TreeSampler:
    """Samples the summed RSS of this process's descendants (minus `exclude`) every `interval_s`,
    and their PSS every `pss_every`-th time. Reading PSS every 0.5 s cost this process a quarter
    of a core during a 100k crawl on 2 cores, taken from the crawler it measured (py-spy)."""

    exclude: set[int]
    interval_s: float = 0.5
    pss_every: int = 4
    max_samples: int = 20_000  # about 2.8 h at 0.5 s: the sampler always stops
    peak_rss: int = 0
    peak_pss: int = 0
    peak_processes: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and self.samples < self.max_samples:
            pids = descendants(self.exclude)
            mem = [_memory(p, self.samples % self.pss_every == 0) for p in pids]
            self.peak_rss = max(self.peak_rss, sum(m[0] for m in mem))
            self.peak_pss = max(self.peak_pss, sum(m[1] for m in mem))
            self.peak_processes = max(self.peak_processes, len(pids))
            self.samples += 1
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


class CpuWindow:
    """CPU seconds used by the descendants (minus `exclude`) between `start()` and `stop()`."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self._start = 0.0
        self.seconds = float("nan")

    def _now(self) -> float:
        return sum(descendants(self.exclude).values()) + children_cpu_s()

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> None:
        self.seconds = self._now() - self._start


def reap_and_kill_leftovers(exclude: set[int], keep: frozenset[int] = frozenset(),
                            timeout_s: float = 10.0) -> list[str]:
    """Stop descendants (minus `exclude`/`keep`) still alive after a crawler was stopped, then reap
    every zombie child that is not a `subprocess.Popen` we still own (`keep`). Returns the names of
    the processes that had to be signalled."""
    left = [p for p in descendants(exclude) if p not in keep and not _is_zombie(p)]
    names = [_name(p) for p in left]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s / 2
        while time.monotonic() < deadline and any(not _is_zombie(p) and _alive(p) for p in left):
            _reap(exclude | keep)
            time.sleep(0.05)
    for _ in range(1000):
        if not _reap(exclude | keep):
            break
    return names


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return str(pid)
    words = [a.decode(errors="replace").rsplit("/", 1)[-1] for a in argv[:3] if a]
    return f"{pid} ({' '.join(words)[:60]})"


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return True
    return raw[raw.rindex(b")") + 2:].split()[0] == b"Z"


def _reap(skip: set[int]) -> bool:
    """Reap one exited child not in `skip` (peeking first, so a Popen we still own is left alone)."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    if info is None or info.si_pid in skip:
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(info.si_pid, 0)
    return True
