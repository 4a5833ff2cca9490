"""The machine's CPU by process and by library (shared object) while a crawl CLI runs, from ``perf``.

Where a process's CPU goes below Python: the interpreter, DuckDB and its DuckLake and catalog
extensions, Resiliparse and lexbor (the parse), fastwarc (the WARC archive), OpenBLAS threads, the
kernel (page faults). ``py-spy --gil`` misses all of it that runs with the GIL released, which is
what finds OpenBLAS's spinning threads and the DuckDB share of a batch run (see
docs/benchmarks.md). Start it before a benchmark; it waits for the process whose command line contains
``--during`` (``compare.py``'s ``crawl --wait`` CLI by default), samples every CPU with
``perf record -a`` until that process ends, and prints each process's CPU seconds by library:

    .venv/bin/python benchmarks/cpu_by_library.py &
    .venv/bin/python benchmarks/compare.py --docs --mode dagster --scrapy-concurrency

Needs ``perf`` (Debian's ``linux-perf``) and the right to sample every CPU (root, or
``kernel.perf_event_paranoid`` at most 0).
"""

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SAMPLE = re.compile(r"^\s*(\d+)\s+[0-9a-f]+\s+\((.*)\)\s*$")


def _processes() -> dict[int, str]:
    """Every live process's id and command line (as far as /proc lets us read it)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if raw:  # a process that has exited (a zombie) has none: the name seen earlier stays
                found[int(entry)] = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def _watched(pattern: str, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid, cmdline in _processes().items():
            if pattern in cmdline and pid != os.getpid():
                return pid
        time.sleep(0.02)
    sys.exit(f"cpu_by_library.py: no process matching {pattern!r} within {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--during", default="cli.main crawl", help="command-line text of the process to wait for")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for it to start (1800)")
    parser.add_argument("--frequency", type=int, default=499, help="samples per second and CPU (499)")
    parser.add_argument("--top", type=int, default=8, help="libraries shown per process (8)")
    parser.add_argument("--min-seconds", type=float, default=0.1, help="processes below this are summed (0.1)")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("cpu_by_library.py: perf is not installed (apt-get install linux-perf)")
    pid = _watched(args.during, args.timeout)
    names = _processes()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        record = subprocess.Popen(["perf", "record", "-a", "-F", str(args.frequency), "-o", str(data)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started = time.monotonic()
        while os.path.exists(f"/proc/{pid}") and record.poll() is None:
            names.update(_processes())
            time.sleep(0.1)
        wall = time.monotonic() - started
        record.send_signal(signal.SIGINT)
        _, err = record.communicate(timeout=120)
        if not data.exists():
            sys.exit(f"cpu_by_library.py: perf record failed: {err.decode(errors='replace').strip()[-300:]}")
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "pid,ip,dso", "-G"],
                                capture_output=True, text=True, check=False)
    samples: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in script.stdout.splitlines():
        if (match := _SAMPLE.match(line)) and match.group(1) != "0":  # pid 0: the CPUs' idle loop
            samples[int(match.group(1))][Path(match.group(2)).name or match.group(2)] += 1
    seconds = {p: sum(c.values()) / args.frequency for p, c in samples.items()}
    print(f"{wall:.1f} s of wall time while {args.during!r} ran (pid {pid}); "
          f"{sum(seconds.values()):.1f} CPU s sampled, by process and library:")
    small = 0.0
    for process, cpu in sorted(seconds.items(), key=lambda kv: -kv[1]):
        if cpu < args.min_seconds:
            small += cpu
            continue
        print(f"  {cpu:6.2f} s  pid {process}  {names.get(process, '?')[:110]}")
        for library, count in samples[process].most_common(args.top):
            print(f"      {count / args.frequency:6.2f} s  {library}")
    print(f"  {small:6.2f} s  in processes below {args.min_seconds} s each")


if __name__ == "__main__":
    main()
