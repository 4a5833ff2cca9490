"""`crawl-platform up` (what `make run` runs): the embedded stack starts, crawls the demo site,
serves the Dagster UI, and Ctrl-C stops every process it started."""

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest
from dagster import DefaultSensorStatus

from crawl_platform.bus.broker import free_port, port_open
from crawl_platform_dagster.definitions import defs
from tests.e2e.conftest import CRAWL_PLATFORM, REPO

pytestmark = pytest.mark.e2e(seconds=80)


def _graphql(port, query):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
        return json.loads(response.read())["data"]


def test_up_runs_the_demo_crawl_and_ctrl_c_stops_everything(tmp_path):
    ui_port, broker_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "CRAWL_", "DAGSTER_"))}
    # Every path in the test's own folder: the default data/ is the checkout's, shared by every run.
    env |= {"DAGSTER_HOME": str(tmp_path / "home"), "CRAWL_LAKE_PATH": str(tmp_path / "lake"),
            "CRAWL_HANDOFF_DIR": str(tmp_path / "handoff"), "CRAWL_HOST_DELAY_MS": "0"}
    # Started as a shell without job control starts `cmd &`: with SIGINT ignored, which Python
    # then never turns into KeyboardInterrupt. Ctrl-C (SIGINT) must stop it all the same.
    up = subprocess.Popen([*CRAWL_PLATFORM, "up", "--port", str(ui_port),
                           "--broker-port", str(broker_port), "--demo-pages", "40"],
                          env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # noqa: PLW1509
    lines = []
    try:
        deadline = time.monotonic() + 240
        crawl_id = None
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            assert line, "up exited early:\n" + "".join(lines)
            lines.append(line)
            if "submitted crawl" in line:
                crawl_id = line.rsplit(" ", 1)[1].strip()
                break
        assert crawl_id, "".join(lines)
        # The demo crawl is submitted once the runs' fork server has imported everything.
        assert any(line.startswith("runs start warm") for line in lines), "".join(lines)
        assert port_open("127.0.0.1", ui_port)
        status_env = {**env, "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker_port}"}
        while time.monotonic() < deadline:
            status = subprocess.run([*CRAWL_PLATFORM, "status", "--crawl-id", crawl_id],
                                    env=status_env, cwd=REPO, capture_output=True, text=True, check=False)
            cells = [c.strip() for c in status.stdout.split("│") if c.strip()]
            if status.returncode == 0 and crawl_id in cells and cells[cells.index(crawl_id) + 1] == "0":
                break
            time.sleep(2)
        else:
            pytest.fail("demo crawl did not finish:\n" + status.stdout + "".join(lines))
        # The last level's pages are counted before its run ends: wait for a batch run to succeed.
        succeeded = set()
        while "crawl_batch_job" not in succeeded and time.monotonic() < deadline:
            runs = _graphql(ui_port, "{ runsOrError { ... on Runs { results { status jobName } } } }")
            succeeded = {r["jobName"] for r in runs["runsOrError"]["results"] if r["status"] == "SUCCESS"}
            time.sleep(0 if "crawl_batch_job" in succeeded else 1)
        assert "crawl_batch_job" in succeeded
        # The seeds sensor registered the crawl itself (no intake run) and reported `crawls`.
        crawls = _graphql(ui_port, '{ assetOrError(assetKey: {path: ["crawls"]}) { ... on Asset { '
                                   'assetMaterializations(limit: 5) { metadataEntries { label } } } } }')
        events = crawls["assetOrError"]["assetMaterializations"]
        assert events
        assert {"crawls_registered", "seeds_admitted"} <= {e["label"] for e in events[0]["metadataEntries"]}
        repos = _graphql(ui_port, "{ repositoriesOrError { ... on RepositoryConnection { nodes { "
                                  "sensors { name sensorState { status } } } } } }")
        states = {s["name"]: s["sensorState"]["status"]
                  for repo in repos["repositoriesOrError"]["nodes"] for s in repo["sensors"]}
        # Every sensor of the definitions is there, in the state it defaults to (the crawl's own on).
        assert states == {s.name: "RUNNING" if s.default_status == DefaultSensorStatus.RUNNING else "STOPPED"
                          for s in defs.sensors}
        assert {"frontier_sensor", "seeds_sensor", "quality_sensor"} <= {n for n, s in states.items() if s == "RUNNING"}
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
    assert up.returncode == 0
    for port in (ui_port, broker_port):
        assert not port_open("127.0.0.1", port)
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "home")], capture_output=True, text=True, check=False)
    assert leftover.stdout == ""
