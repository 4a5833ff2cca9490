"""The crawled websites of the multi-machine test, run on a host of their own.

``python -m tests.cluster.site_host ADDRESS FOLDER --sites N --pages P`` serves N generated demo
sites (one port each, so N hosts to the crawler) on ADDRESS, writes the URLs a correct crawl
lands to ``FOLDER/expected.json`` and appends one line per answered request to
``FOLDER/access.log``: ``<unix time it arrived> <unix time it was answered> <client address> <port>
<status> <path>``, within a fifth of a second of its answer. Politeness across the worker hosts is
read from that log. It runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from crawl_platform.cli.demo_site import DemoSite, SiteServer


class Request(NamedTuple):
    at: float
    answered: float
    client: str
    port: int
    status: int
    path: str


def parse_log(text: str) -> list[Request]:
    requests = []
    for line in text.splitlines():
        at, answered, client, port, status, path = line.split(" ", 5)
        requests.append(Request(float(at), float(answered), client, int(port), int(status), path))
    return requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--sites", type=int, default=4)
    parser.add_argument("--pages", type=int, default=100, help="pages per site")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    lock = threading.Lock()
    log = (args.folder / "access.log").open("a", buffering=1)
    wall_minus_monotonic = time.time() - time.monotonic()

    with contextlib.ExitStack() as stack:
        servers: list[SiteServer] = []
        for i in range(args.sites):
            site = DemoSite(n_pages=args.pages, seed=args.seed + i)
            server = stack.enter_context(site.serve(host=args.address))
            servers.append(server)
        expected = sorted(set().union(*(s.site.expected_urls(s.base_url) for s in servers)))
        (args.folder / "expected.json").write_text(json.dumps(expected))
        stopped = threading.Event()

        def stop(_sig: int, _frame: FrameType | None) -> None:
            stopped.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        # The servers keep their log in memory, with monotonic times; copy it out as it grows.
        written = [0] * len(servers)
        while not stopped.wait(0.2):
            with lock:
                for i, server in enumerate(servers):
                    new = server.requests[written[i]:]
                    written[i] += len(new)
                    for r in new:
                        log.write(f"{r.started_at + wall_minus_monotonic:.6f} "
                                  f"{r.finished_at + wall_minus_monotonic:.6f} {r.client_host} {server.port} "
                                  f"{r.status} {r.path}\n")
        log.close()


if __name__ == "__main__":
    main()
