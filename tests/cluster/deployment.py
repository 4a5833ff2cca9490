"""`deploy/hosts.toml` read into hosts, steps and environments, with its placeholders filled in.

The same file drives the multi-machine test (:mod:`tests.cluster.network` builds the hosts and
runs these steps in them) and is what docs/deployment.md shows: :func:`render_guide_values` fills
the placeholders with the guide's example folders, and the guide's check compares it line by line.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOSTS_TOML = REPO / "deploy" / "hosts.toml"
PLACEHOLDER = re.compile(r"\{(address|control|home|repo)\}")

GUIDE_VALUES = {"home": "/srv/crawl", "repo": "/opt/crawl-platform"}
"""What the guide writes for the folders the test makes per run."""


@dataclass(frozen=True)
class Step:
    """One line of a host's start order: ``command`` finishes (``kind == "run"``) or keeps running
    (``"start"``, then ``ready`` is the TCP port it listens on, or None)."""

    name: str
    kind: str
    command: str
    user: str | None
    ready: int | None


@dataclass(frozen=True)
class HostPlan:
    name: str
    address: str
    role: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Deployment:
    subnet: str
    env: dict[str, str]
    hosts: tuple[HostPlan, ...]

    def host(self, name: str) -> HostPlan:
        return next(h for h in self.hosts if h.name == name)

    @property
    def control(self) -> HostPlan:
        return self.host("control")

    @property
    def workers(self) -> list[HostPlan]:
        return [h for h in self.hosts if h.name.startswith("worker-")]


def load_deployment(path: Path = HOSTS_TOML) -> Deployment:
    data = tomllib.loads(path.read_text())
    hosts = []
    for host in data["host"]:
        steps = []
        for step in host.get("step", []):
            kind = "run" if "run" in step else "start"
            steps.append(Step(step["name"], kind, step[kind], step.get("user"), step.get("ready")))
        hosts.append(HostPlan(host["name"], host["address"], host["role"], tuple(steps)))
    return Deployment(data["network"]["subnet"], dict(data["env"]), tuple(hosts))


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{placeholder}`` of ``values`` replaced; other braces are left as they are."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def host_values(deployment: Deployment, host: HostPlan, home: str, repo: str) -> dict[str, str]:
    return {"address": host.address, "control": deployment.control.address, "home": home, "repo": repo}


def host_env(deployment: Deployment, values: dict[str, str]) -> dict[str, str]:
    """The host's environment as the guide lists it (the test adds PATH and nothing else)."""
    return {name: fill(value, values) for name, value in deployment.env.items()}


def render_guide_values(deployment: Deployment, host: HostPlan) -> dict[str, str]:
    return host_values(deployment, host, **GUIDE_VALUES)
