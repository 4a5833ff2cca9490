"""How long a crawl goes on fetching after ``crawl-platform pause`` and ``cancel``.

Starts the platform as a user runs it (``crawl-platform up --no-demo``: the embedded broker, the
Dagster code server, daemon and webserver, in a new ``DAGSTER_HOME`` and lake), serves a generated
one-host site with nginx (``static_site.py``), and for each round crawls it under a crawl id and a
User-Agent of its own at the default politeness (250 ms between two requests to the host, or
``--host-delay-ms``). Once ``--after`` page requests of the crawl have reached nginx it runs
``crawl-platform pause``; once nginx has seen no request of the crawl for ``--quiet-s``,
``crawl-platform resume``; after ``--after`` more page requests, ``crawl-platform cancel``.

For each command it prints the seconds from the command's start to the last request of the crawl
that nginx's access log shows after it (0 when none came), which is what a site owner sees, and
how long the command itself took (its process start and its lake write); for each resume, the
seconds to the crawl's first request after it. Then the median and the maximum over the rounds.

    .venv/bin/python benchmarks/control_latency.py --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from static_site import NginxServer, StaticSite, free_port

from crawl_platform.config import Settings

READY = "crawl your own sites"  # what `up` prints once Dagster is up (and its runs start warm)


@dataclass(frozen=True)
class Request:
    arrived: float  # epoch seconds, nginx's clock ($msec less $request_time)
    path: str


def crawl_requests(server: NginxServer, agent: str) -> list[Request]:
    """The requests nginx logged with ``agent`` as User-Agent, in the order they arrived."""
    found = []
    if server.access_log.exists():
        with server.access_log.open("rb") as log:
            for line in log:
                fields = line.split(b'"')
                if len(fields) < 5 or fields[3].decode(errors="replace") != agent:
                    continue
                target = fields[1].split(b" ")
                msec = float(fields[4].split()[0])
                found.append(Request(msec - float(fields[0].split()[0]), target[1].decode() if len(target) > 1 else ""))
    return sorted(found, key=lambda r: r.arrived)


def page_requests(server: NginxServer, agent: str) -> list[Request]:
    return [r for r in crawl_requests(server, agent) if r.path != "/robots.txt"]


class Platform:
    """``crawl-platform up --no-demo`` in a temporary directory, and its commands."""

    def __init__(self, workdir: Path, host_delay_ms: int | None) -> None:
        self.workdir = workdir
        self.broker_port = free_port()
        fields: dict[str, object] = {"lake_path": workdir / "lake", "dagster_home": workdir / "dagster_home",
                                     "handoff_dir": workdir / "handoff", "allowed_networks": ["127.0.0.0/8"]}
        if host_delay_ms is not None:
            fields["host_delay_ms"] = host_delay_ms
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CRAWL_", "KAFKA_", "DAGSTER_"))}
        # Only what differs from a user's first run: its own directories, and sites on loopback.
        self.env = {**base, **{Settings.env_var(k): json.dumps(v) if isinstance(v, list) else str(v)
                               for k, v in fields.items()}}
        # The commands reach the broker `up` started.
        self.cli_env = {**self.env, Settings.env_var("kafka_bootstrap_servers"): f"127.0.0.1:{self.broker_port}"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 300.0) -> None:
        log_path = self.workdir / "up.log"
        log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crawl_platform_dagster.cli", "up", "--no-demo", "--port", str(free_port()),
             "--broker-port", str(self.broker_port)],
            env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while READY not in log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"`crawl-platform up` did not come up; see {log_path}:\n"
                                 f"{log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        time.sleep(3.0)  # a sensor interval, so the sensors are surely ticking

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # `up` stops everything it started
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def cli(self, *args: str) -> float:
        """Run ``crawl-platform ARGS``; the seconds it took. A failure ends the benchmark."""
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "crawl_platform.cli.main", *args], env=self.cli_env, cwd=REPO,
                              capture_output=True, text=True, check=False, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"crawl-platform {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return time.monotonic() - started


def wait_for_pages(server: NginxServer, agent: str, count: int, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(page_requests(server, agent)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the crawl did not reach {count} page requests in {timeout_s:.0f} s")
        time.sleep(0.2)


def command_latency(platform: Platform, server: NginxServer, agent: str, action: str, crawl_id: str,
                    quiet_s: float, timeout_s: float = 600.0) -> tuple[float, float]:
    """(seconds from the command's start to the crawl's last request after it, seconds the
    command took); waits until nginx has seen no request of the crawl for ``quiet_s``."""
    issued = time.time()
    took = platform.cli(action, crawl_id)
    deadline = time.monotonic() + timeout_s
    while True:
        last = max((r.arrived for r in crawl_requests(server, agent)), default=issued)
        if time.time() - max(last, issued) >= quiet_s:
            return max(0.0, last - issued), took
        if time.monotonic() > deadline:
            raise SystemExit(f"the crawl still fetched {timeout_s:.0f} s after {action}")
        time.sleep(0.5)


def summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.1f} s, max {max(values):.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="crawls, each paused, resumed and cancelled (3)")
    parser.add_argument("--pages", type=int, default=3000, help="pages of the generated site (3000)")
    parser.add_argument("--host-delay-ms", type=int, default=None,
                        help="CRAWL_HOST_DELAY_MS (default: the platform's, 250 ms)")
    parser.add_argument("--after", type=int, default=40, help="page requests of the crawl before each command (40)")
    parser.add_argument("--quiet-s", type=float, default=15.0,
                        help="seconds without a request of the crawl after which a command has taken effect (15)")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"pause": [], "cancel": [], "resume": [], "command": []}
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="control-latency-")))
        site = StaticSite(args.pages, seed=1)
        site.write(workdir / "site")
        server = NginxServer(workdir / "site", workdir / "nginx").start()
        stack.callback(server.stop)
        platform = Platform(workdir, args.host_delay_ms)
        stack.callback(platform.stop)
        platform.start()
        delay = args.host_delay_ms if args.host_delay_ms is not None else Settings().host_delay_ms
        print(f"platform up (`crawl-platform up --no-demo`); {args.rounds} round(s) on a {args.pages}-page "
              f"site served by nginx at {delay} ms a request, commands after {args.after} page requests; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        for round_ in range(1, args.rounds + 1):
            crawl_id = f"ctl-{round_}"
            agent = f"control-latency/{crawl_id}"
            platform.cli("crawl", server.base_url + "/", "--crawl-id", crawl_id, "--user-agent", agent,
                         "--max-pages", str(10 * args.pages), "--max-depth", "100")
            wait_for_pages(server, agent, args.after)
            pause, took_pause = command_latency(platform, server, agent, "pause", crawl_id, args.quiet_s)
            seen = len(page_requests(server, agent))
            resumed_at = time.time()
            took_resume = platform.cli("resume", crawl_id)
            wait_for_pages(server, agent, seen + args.after)
            first = min(r.arrived for r in page_requests(server, agent)[seen:]) - resumed_at
            cancel, took_cancel = command_latency(platform, server, agent, "cancel", crawl_id, args.quiet_s)
            figures["pause"].append(pause)
            figures["cancel"].append(cancel)
            figures["resume"].append(first)
            figures["command"] += [took_pause, took_resume, took_cancel]
            print(f"round {round_}: last request {pause:.1f} s after pause, {cancel:.1f} s after cancel; "
                  f"first request {first:.1f} s after resume; the commands took {took_pause:.1f}, "
                  f"{took_resume:.1f}, {took_cancel:.1f} s (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"pause -> last request: {summary(figures['pause'])} over {args.rounds} command(s)")
    print(f"cancel -> last request: {summary(figures['cancel'])} over {args.rounds} command(s)")
    print(f"resume -> first request: {summary(figures['resume'])} over {args.rounds} command(s)")
    print(f"a command's own run (process start, lake write): {summary(figures['command'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
