"""What hostile robots.txt bodies cost: each fills ROBOTS_MAX_BYTES (512 KiB), asked about a URL of
MAX_URL_LENGTH (2,048) characters that the wildcard rules nearly match.

For each body: reading it (``policy_from``), the first question for an agent (its rules built),
and one more question (the cost every URL of the host pays, GIL held). ``--protego`` measures the
straightforward design for comparison: group lines found by a multi-line regex and Protego given
the whole body; the bodies quadratic there are shrunk to 32 KiB unless ``--full`` (at 512 KiB they
take minutes, or gigabytes).

    .venv/bin/python benchmarks/robots_worst.py
    .venv/bin/python benchmarks/robots_worst.py --protego
"""

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protego import Protego

from crawl_platform.fetch.robots import ROBOTS_MAX_BYTES, policy_from
from crawl_platform.urls import MAX_URL_LENGTH

ORIGIN = "http://h.example"
URL = ORIGIN + "/" + "a" * (MAX_URL_LENGTH - len(ORIGIN) - 1)
AGENT = "bot/1.0"


def fill(head: str, line: Callable[[int], str], size: int) -> str:
    """``head`` then ``line(i)`` for i = 0, 1, ... while the body stays within ``size`` bytes."""
    lines, used, i = [head] if head else [], len(head) + 1, 0
    while used + len(line(i)) + 1 <= size:
        lines.append(line(i))
        used += len(line(i)) + 1
        i += 1
    return "\n".join(lines) + "\n"


def agents_then_rules(size: int) -> str:
    half = fill("User-agent: *", lambda i: f"User-agent: a{i}", size // 2)
    return half + fill("", lambda i: f"Disallow: /x{i}", size - len(half))


BODIES: dict[str, tuple[Callable[[int], str], bool]] = {  # name: (body of a size, quadratic in Protego alone)
    "wildcards /*a*a*a*a*a*a*b{i}": (
        lambda n: fill("User-agent: *", lambda i: f"Disallow: /*a*a*a*a*a*a*b{i}", n), False),
    "wildcards /*a{98}ba*{i} (str.find's worst)": (
        lambda n: fill("User-agent: *", lambda i: f"Disallow: /*{'a' * 98}ba*{i}", n), False),
    "wildcards with $": (lambda n: fill("User-agent: *", lambda i: f"Disallow: /*a*a*a*b{i}$", n), False),
    "one wildcard rule repeated": (lambda n: fill("User-agent: *", lambda i: "Disallow: /*a*a*a*a*a*a*b", n), False),
    "plain prefixes, the URL's the shortest": (
        lambda n: fill("User-agent: *\nAllow: /a", lambda i: f"Disallow: /a{'a' * (i % 1500)}b", n), False),
    "agent lines then rules": (agents_then_rules, True),
    "blank lines": (lambda n: "\n" * n, True),
}


def ours(body: str) -> tuple[float, float, float]:
    started = time.perf_counter()
    policy = policy_from(200, body, 0.0, 1e9, 1.0)
    read = time.perf_counter() - started
    started = time.perf_counter()
    policy.allows(URL, AGENT)
    first = time.perf_counter() - started
    return read, first, _question(lambda: policy.allows(URL, AGENT))


_GROUP_LINE = re.compile(r"^\s*user-agent\s*:\s*([^#\s]+)", re.I | re.M)


def protego_alone(body: str) -> tuple[float, float, float]:
    started = time.perf_counter()
    _GROUP_LINE.findall(body)
    rules = Protego.parse(body)
    read = time.perf_counter() - started
    started = time.perf_counter()
    rules.can_fetch(URL, "*")
    first = time.perf_counter() - started
    return read, first, _question(lambda: rules.can_fetch(URL, "*"))


def _question(ask: Callable[[], object], times: int = 5) -> float:
    started = time.perf_counter()
    for _ in range(times):
        ask()
    return (time.perf_counter() - started) / times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protego", action="store_true", help="Protego given the whole body")
    parser.add_argument("--full", action="store_true", help="with --protego: quadratic bodies at 512 KiB too")
    args = parser.parse_args()
    print(f"{'body':44s} {'KiB':>5s} {'read ms':>9s} {'first ms':>9s} {'per URL ms':>10s}")
    for name, (make, quadratic) in BODIES.items():
        size = 32 * 1024 if args.protego and quadratic and not args.full else ROBOTS_MAX_BYTES
        body = make(size)
        read, first, per_url = (protego_alone if args.protego else ours)(body)
        print(f"{name:44s} {len(body) // 1024:5d} {read * 1000:9.1f} {first * 1000:9.1f} {per_url * 1000:10.2f}")


if __name__ == "__main__":
    main()
