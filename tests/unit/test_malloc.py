"""The C heap of a crawling process: few malloc arenas under many fetch threads, free pages handed back.

Each case runs in a fresh interpreter, so its arenas and resident memory are its own.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from crawl_platform.malloc import _glibc

pytestmark = pytest.mark.skipif(_glibc() is None, reason="the C library is not glibc")

# Eight threads allocate response-sized blocks at once, as a batch's fetch threads do; then the
# process counts its malloc arenas from glibc's own report (malloc_info).
ARENAS = """
import ctypes, sys, threading
from crawl_platform.malloc import limit_arenas
if sys.argv[1] == "capped":
    limit_arenas()
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
start = threading.Barrier(8)
def fetch_like():
    start.wait()
    for _ in range(200):
        bodies = [bytes(3000) for _ in range(200)]
threads = [threading.Thread(target=fetch_like) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
text, size = ctypes.c_char_p(), ctypes.c_size_t()
report = libc.open_memstream(ctypes.byref(text), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(report))
libc.fclose(ctypes.c_void_p(report))
print(text.value.decode().count("<heap nr="))
"""

# A thread allocates 60,000 response-sized blocks and keeps one in fifty, as a landed batch keeps
# a few of its objects: the free pages stay resident until they are released.
RELEASE = """
import threading
from crawl_platform.malloc import release_free_memory
def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20
kept = []
def batch_like():
    bodies = [bytes(3000) for _ in range(60_000)]
    kept.extend(bodies[::50])
t = threading.Thread(target=batch_like)
t.start()
t.join()
before = resident_mb()
release_free_memory()
print(before, resident_mb())
"""


def _run(code: str, *args: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return [int(n) for n in out.split()]


def test_fetch_threads_share_the_capped_arenas() -> None:
    (uncapped,) = _run(ARENAS, "uncapped")
    (capped,) = _run(ARENAS, "capped")
    assert uncapped > 2, "glibc gave the threads no arenas of their own: the case proves nothing"
    assert capped <= 2


def test_free_pages_go_back_to_the_system() -> None:
    before, after = _run(RELEASE)
    # 60,000 blocks of 3 KB hold about 180 MB; one in fifty stays.
    assert before - after > 100, (before, after)
