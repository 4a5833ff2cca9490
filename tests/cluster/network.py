"""Hosts as Linux network namespaces on one bridge, each with its own folder, for the multi-machine test.

A :class:`Network` makes a bridge in the root namespace and, per :class:`Host`, a namespace (``ip
netns``) with a veth pair into the bridge, the host's address on its end and its own loopback.
Nothing routes between the hosts and the root namespace, so the machine's own services (on
loopback) are out of their reach, as another machine's would be. Processes are started in a host
with ``ip netns exec``; each host has its own folder, and every process of a host is found by
its namespace (``ip netns pids``), so killing a host leaves nothing of it running, whatever
sessions its processes made. Cutting a host's link takes its veth down in the root namespace.

Every network is written in a ledger under :data:`LEDGER` with its owner's PID before anything
is made; a network whose owner is gone (a killed test run) is removed by the next one to start,
namespaces, processes, links and folders.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from crawl_platform_dagster.launcher import process_alive

LEDGER = Path("/run/crawl-hosts")
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
CGROUPS = (_CPUACCT if _CPUACCT.is_dir() else Path("/sys/fs/cgroup")) / "crawl-hosts"
"""Each host's processes are in a control group of their own (cgroup v1's cpuacct hierarchy where
the machine has it, else the unified one), which counts their CPU time, that of processes already
gone included."""
HOMES = Path("/var/tmp/crawl-hosts")
"""Each network's hosts' folders, one folder per network (traversable by the services' own users,
which a test's temporary folder is not)."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def namespace_pids(namespace: str) -> list[int]:
    out = ip("netns", "pids", namespace, check=False).stdout
    return [int(pid) for pid in out.split()]


def kill_namespace(namespace: str, timeout_s: float = 10.0) -> None:
    """SIGKILL every process in ``namespace`` until none is left (forks in flight are caught by the next pass)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = namespace_pids(namespace)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def remove_network(record: dict[str, object]) -> None:
    for namespace in record.get("namespaces", []):  # type: ignore[union-attr]
        kill_namespace(str(namespace))
        ip("netns", "del", str(namespace), check=False)
        with contextlib.suppress(OSError):
            (CGROUPS / str(namespace)).rmdir()
    ip("link", "del", str(record["bridge"]), check=False)
    shutil.rmtree(HOMES / str(record["bridge"]).removesuffix("br"), ignore_errors=True)


def remove_orphans() -> None:
    """Remove every network in the ledger whose owner process is gone."""
    if not LEDGER.is_dir():
        return
    for entry in LEDGER.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(entry.read_text())
            if not process_alive(int(record["owner"])):
                remove_network(record)
                entry.unlink()


class Host:
    """One namespace with an address on the network and a folder of its own."""

    def __init__(self, network: Network, name: str, address: str, index: int) -> None:
        self.network = network
        self.name = name
        self.address = address
        self.namespace = f"{network.prefix}-{name}"
        self.link = f"{network.prefix}{index}"  # the root namespace's end of the veth pair
        self.home = network.root / name
        self.cgroup: Path | None = CGROUPS / self.namespace
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def create(self, prefix_len: int) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o755)
        (self.home / "logs").mkdir(exist_ok=True)
        try:
            self.cgroup.mkdir(parents=True, exist_ok=True)
        except OSError:  # no writable cgroup hierarchy: the host runs, uncounted
            self.cgroup = None
        ip("netns", "add", self.namespace)
        ip("link", "add", self.link, "type", "veth", "peer", "name", "eth0", "netns", self.namespace)
        ip("link", "set", self.link, "master", self.network.bridge, "up")
        ip("-n", self.namespace, "addr", "add", f"{self.address}/{prefix_len}", "dev", "eth0")
        ip("-n", self.namespace, "link", "set", "eth0", "up")
        ip("-n", self.namespace, "link", "set", "lo", "up")

    def argv(self, command: str, user: str | None = None) -> list[str]:
        """``command``'s bash lines in this host (its namespace and control group), as ``user``."""
        as_user = ["runuser", "-u", user, "--"] if user else []
        # Into the control group first: `ip netns exec` mounts a sysfs of the namespace's own,
        # without the machine's cgroup folders.
        join = f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"' if self.cgroup else 'exec "$@"'
        return ["bash", "-c", join, self.name, "ip", "netns", "exec", self.namespace, *as_user, "bash", "-ec", command]

    def cpu_seconds(self) -> float:
        """CPU time of every process this host has run so far."""
        if self.cgroup is None:
            raise RuntimeError(f"{self.name}: no control group counts this host's CPU")
        if (self.cgroup / "cpuacct.usage").exists():
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.cgroup / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def run(self, command: str, env: dict[str, str], user: str | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in this host and wait for it."""
        return subprocess.run(self.argv(command, user), env=env, cwd=self.home, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def start(self, name: str, command: str, env: dict[str, str], user: str | None = None) -> subprocess.Popen[bytes]:
        """Start a process that keeps running; its output goes to ``logs/<name>.log`` in the host's folder."""
        with open(self.log_path(name), "ab") as log:
            proc = subprocess.Popen(self.argv(command, user), env=env, cwd=self.home, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        return proc

    def log_path(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def log(self, name: str) -> str:
        path = self.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def port_open(self, port: int, address: str | None = None) -> bool:
        probe = f"exec 3<>/dev/tcp/{address or self.address}/{port}"
        return subprocess.run(self.argv(probe), capture_output=True, timeout=10, check=False).returncode == 0

    def wait_port(self, port: int, timeout_s: float, process: str | None = None) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.port_open(port):
                return
            proc = self.processes.get(process or "")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{self.name}: {process} exited ({proc.returncode}): "
                                   f"{self.log(process or '')[-3000:]}")
            time.sleep(0.3)
        raise TimeoutError(f"{self.name}: nothing listens on {self.address}:{port} after {timeout_s:g} s")

    def kill(self) -> None:
        """Every process of this host, SIGKILL: the machine is gone."""
        kill_namespace(self.namespace)
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to every process of this host, SIGKILL to what is left after ``grace_s``."""
        for pid in namespace_pids(self.namespace):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while namespace_pids(self.namespace) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.kill()

    def signal_program(self, program: str, signum: signal.Signals) -> list[int]:
        """Send ``signum`` to every process of this host running ``program`` (its ``comm``); their PIDs."""
        pids = []
        for pid in namespace_pids(self.namespace):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == program:
                    os.kill(pid, signum)
                    pids.append(pid)
        return pids

    @contextlib.contextmanager
    def paused(self, program: str) -> Iterator[list[int]]:
        """Every ``program`` process of this host stopped (SIGSTOP) inside the block: it holds its
        connections and answers nothing, as a server behind a partition; SIGCONT at the end."""
        pids = self.signal_program(program, signal.SIGSTOP)
        try:
            yield pids
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def cut_link(self) -> None:
        ip("link", "set", self.link, "down")

    def restore_link(self) -> None:
        ip("link", "set", self.link, "up")


class Network:
    """The bridge and the hosts on it; a context manager that removes all of it on exit."""

    def __init__(self, subnet: str) -> None:
        self.prefix = "ch" + uuid.uuid4().hex[:5]  # interface names stay under 15 characters
        self.bridge = f"{self.prefix}br"
        self.root = HOMES / self.prefix
        self.prefix_len = int(subnet.split("/")[1])
        self.hosts: dict[str, Host] = {}
        self.ledger = LEDGER / f"{self.prefix}.json"

    def __enter__(self) -> Network:
        remove_orphans()
        LEDGER.mkdir(parents=True, exist_ok=True)
        self._write_ledger()
        self.root.mkdir(parents=True)
        for folder in (HOMES, self.root):
            folder.chmod(0o755)
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "up")
        return self

    def _write_ledger(self) -> None:
        record = {"owner": os.getpid(), "bridge": self.bridge,
                  "namespaces": [f"{self.prefix}-{name}" for name in self.hosts]}
        self.ledger.write_text(json.dumps(record))

    def add_host(self, name: str, address: str) -> Host:
        host = Host(self, name, address, len(self.hosts))
        self.hosts[name] = host
        self._write_ledger()  # before the namespace exists: a kill between the two leaves nothing unrecorded
        host.create(self.prefix_len)
        return host

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for host in reversed(list(self.hosts.values())):
            host.stop(grace_s=5)
        remove_network(json.loads(self.ledger.read_text()))
        self.ledger.unlink(missing_ok=True)
