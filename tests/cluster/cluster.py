"""The deployment of `deploy/hosts.toml` brought up on namespace hosts, plus a host serving the sites.

:func:`start_cluster` makes the network, runs every host's steps in the file's order (the control
host first, then the workers) and yields a :class:`Cluster` that starts site hosts and runs
commands on any host with that host's environment. Each host gets the file's environment with its
own folder filled in, plus ``PATH`` (this checkout's virtualenv first, as an installed platform
would be), ``LANG`` and ``HOME`` (its folder): no path of one host appears in another's
environment, which :meth:`Cluster.assert_private` checks. The hosts share no folder: what one host
writes for another goes through the control host's servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.cluster.deployment import REPO, Deployment, HostPlan, fill, host_env, host_values, load_deployment
from tests.cluster.network import Host, Network
from tests.cluster.site_host import Request, parse_log

SITE_ADDRESSES = "10.77.0.{}"  # the site hosts: .30, .31, ...
STEP_TIMEOUT_S = 180.0


class Cluster:
    def __init__(self, deployment: Deployment, network: Network,
                 extra_env: dict[str, str] | None = None) -> None:
        """``extra_env``: settings on top of the file's on every host (a benchmark's, say)."""
        self.deployment = deployment
        self.extra_env = extra_env or {}
        self.network = network
        self.site: Host | None = None

    def host(self, name: str) -> Host:
        return self.network.hosts[name]

    def env(self, host: Host) -> dict[str, str]:
        values = self.values(host)
        path = f"{Path(sys.executable).parent}{os.pathsep}/usr/sbin{os.pathsep}/usr/bin{os.pathsep}/bin"
        return {**host_env(self.deployment, values), **self.extra_env, "PATH": path, "LANG": "C.UTF-8",
                "HOME": str(host.home)}

    def values(self, host: Host) -> dict[str, str]:
        plan = self.deployment.host(host.name)
        return host_values(self.deployment, plan, str(host.home), str(REPO))

    def bring_up(self, plan: HostPlan) -> Host:
        """Run ``plan``'s steps on its host, in order; raises with the step's output if one fails."""
        host = self.network.hosts.get(plan.name) or self.network.add_host(plan.name, plan.address)
        env, values = self.env(host), self.values(host)
        for step in plan.steps:
            command = fill(step.command, values)
            if step.kind == "run":
                done = host.run(command, env, user=step.user, timeout=STEP_TIMEOUT_S)
                if done.returncode:
                    raise RuntimeError(f"{plan.name}: step {step.name} failed ({done.returncode}): "
                                       f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
            else:
                host.start(step.name, command, env, user=step.user)
                if step.ready:
                    host.wait_port(step.ready, STEP_TIMEOUT_S, process=step.name)
        return host

    def start_sites(self, sites: int, pages: int, seed: int) -> Host:
        """A new site host serving ``sites`` generated sites of ``pages`` pages; the previous one stops."""
        if self.site is not None:
            self.site.stop()
        number = sum(1 for name in self.network.hosts if name.startswith("site-"))
        address = SITE_ADDRESSES.format(30 + number)
        self.site = self.network.add_host(f"site-{number}", address)
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin", "PYTHONPATH": str(REPO)}
        self.site.start("sites", f"python -m tests.cluster.site_host {address} {self.site.home} "
                        f"--sites {sites} --pages {pages} --seed {seed}", env)
        deadline = time.monotonic() + 60
        while not (self.site.home / "expected.json").exists():
            if time.monotonic() > deadline or self.site.processes["sites"].poll() is not None:
                raise RuntimeError(f"the sites did not start: {self.site.log('sites')[-3000:]}")
            time.sleep(0.2)
        return self.site

    @property
    def expected_urls(self) -> set[str]:
        assert self.site is not None
        return set(json.loads((self.site.home / "expected.json").read_text()))

    @property
    def seeds(self) -> list[str]:
        return sorted({url.split("/", 3)[2] for url in self.expected_urls})

    def site_requests(self) -> list[Request]:
        assert self.site is not None
        return parse_log((self.site.home / "access.log").read_text())

    def cli(self, host: str, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        """``crawl-platform ARGS`` on ``host``, as an operator there would type it."""
        node = self.host(host)
        return node.run(" ".join(["crawl-platform", *args]), self.env(node), timeout=timeout)

    def probe(self, host: str, *args: str, timeout: float = 300.0) -> dict[str, object]:
        """``python -m tests.cluster.probe ARGS`` on ``host``: what that host reads of the lake and archive."""
        node = self.host(host)
        env = {**self.env(node), "PYTHONPATH": str(REPO)}
        done = node.run(" ".join(["python", "-m", "tests.cluster.probe", *args]), env, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"probe on {host} failed: {done.stdout[-2000:]}{done.stderr[-3000:]}")
        result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def assert_private(self) -> None:
        """No host's environment names another host's folder."""
        for host in self.network.hosts.values():
            if host.name.startswith("site-"):
                continue
            text = json.dumps(self.env(host))
            for other in self.network.hosts.values():
                if other is not host:
                    assert str(other.home) not in text, f"{host.name} names {other.name}'s folder"

    def logs_tail(self, chars: int = 2500) -> str:
        out = []
        for host in self.network.hosts.values():
            for log in sorted((host.home / "logs").glob("*.log")):
                out.append(f"--- {host.name}/{log.name}\n{log.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)


@contextlib.contextmanager
def start_cluster(workers: int = 2, deployment: Deployment | None = None,
                  extra_env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """The control host and ``workers`` worker hosts, up; all of it removed on exit."""
    deployment = deployment or load_deployment()
    with Network(deployment.subnet) as network:
        cluster = Cluster(deployment, network, extra_env)
        try:
            cluster.bring_up(deployment.control)
            for plan in deployment.workers[:workers]:
                cluster.bring_up(plan)
            yield cluster
        except BaseException:
            sys.stderr.write(cluster.logs_tail())
            raise
