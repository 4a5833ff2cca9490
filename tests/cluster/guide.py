"""The host-by-host part of docs/deployment.md, written from `deploy/hosts.toml`.

The guide holds this text between ``<!-- hosts.toml -->`` and ``<!-- /hosts.toml -->``;
tests/unit/test_deployment_doc.py checks that it is exactly what :func:`render` gives, and
``python -m tests.cluster.guide`` writes it in. Each command is the one the multi-machine test
runs on that host, with the guide's folders (:data:`~tests.cluster.deployment.GUIDE_VALUES`) in
place of the test's: a step run as another user is a quoted here-document for ``runuser``, a
process that keeps running goes to the background with its output in ``logs/``, and a process
that listens is waited for with the same probe the test uses.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.cluster.deployment import (
    REPO,
    Deployment,
    HostPlan,
    Step,
    fill,
    host_env,
    load_deployment,
    render_guide_values,
)

GUIDE = REPO / "docs" / "deployment.md"
BEGIN, END = "<!-- hosts.toml -->", "<!-- /hosts.toml -->"


def _step_lines(step: Step, values: dict[str, str]) -> list[str]:
    command = fill(step.command, values)
    background = f" > {values['home']}/logs/{step.name}.log 2>&1 &" if step.kind == "start" else ""
    if step.user:
        lines = [f"runuser -u {step.user} -- bash -e <<'EOF'{background}", command, "EOF"]
    else:
        assert step.kind == "run" or "\n" not in command, f"{step.name}: a process started as root is one line"
        lines = [command + background]
    if step.ready:
        lines.append(f"until (exec 3<>/dev/tcp/{values['address']}/{step.ready}) 2>/dev/null; do sleep 0.3; done")
    return lines


def host_script(deployment: Deployment, host: HostPlan) -> str:
    values = render_guide_values(deployment, host)
    lines = [f"mkdir -p {values['home']}/logs"]
    for step in host.steps:
        lines += [f"# {step.name}", *_step_lines(step, values)]
    return "\n".join(lines)


def environment(deployment: Deployment, host: HostPlan) -> str:
    env = host_env(deployment, render_guide_values(deployment, host))
    return "\n".join(f"export {name}={_shell_word(value)}" for name, value in env.items())


def _shell_word(value: str) -> str:
    return value if re.fullmatch(r"[\w@%+=:,./-]+", value) else "'" + value.replace("'", "'\"'\"'") + "'"


def render(deployment: Deployment | None = None) -> str:
    deployment = deployment or load_deployment()
    rows = ["| Host | Address | Runs |", "|---|---|---|"]
    rows += [f"| {h.name} | {h.address} | {h.role} |" for h in deployment.hosts]
    environments = {environment(deployment, h) for h in deployment.hosts}
    assert len(environments) == 1, "the guide shows one environment for every host"
    parts = ["\n".join(rows), "",
             "### Environment (every host)", "",
             "```bash", environments.pop(), "```", "",
             "### Start order", "",
             "Start the hosts in this order, each host's lines from the top; each block is what the test ran there."]
    for host in deployment.hosts:
        parts += ["", f"**{host.name}** ({host.address}):", "", "```bash", host_script(deployment, host), "```"]
    return "\n".join(parts)


def current(guide: Path = GUIDE) -> str:
    text = guide.read_text()
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write(guide: Path = GUIDE) -> None:
    text = guide.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    guide.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}")


if __name__ == "__main__":
    write()
    sys.exit(0)
