"""Stopping the embedded stack leaves none of its Dagster processes behind (crawl_platform_dagster.stack)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.processes import DagsterProcesses, instance_processes
from crawl_platform_dagster.stack import celery_worker_argv

# A stand-in for a run worker: Dagster starts them as `python -c "from multiprocessing.spawn ..."`.
SLEEPER = "import time  # from multiprocessing.spawn import spawn_main\ntime.sleep(60)"


def _sleeper(home: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SLEEPER], env={**os.environ, "DAGSTER_HOME": home},
                            start_new_session=True)


def test_stop_kills_the_instances_orphaned_dagster_processes_and_no_others(tmp_path):
    mine, other = str(tmp_path / "home"), str(tmp_path / "other-home")
    orphan, bystander = _sleeper(mine), _sleeper(other)
    try:
        deadline = time.monotonic() + 10
        while orphan.pid not in instance_processes(mine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert instance_processes(mine) == [orphan.pid]
        DagsterProcesses({"DAGSTER_HOME": mine}, tmp_path / "logs").stop()
        assert orphan.wait(10) == -9
        assert bystander.poll() is None
    finally:
        for proc in (orphan, bystander):
            proc.kill()
            proc.wait()


def _up(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "crawl_platform_dagster.cli", "up", "--no-demo", "--port", str(free_port()),
           "--broker-port", str(free_port())]
    proc = subprocess.Popen(cli, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # it started the stack instead of refusing: stop it
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cli, proc.returncode, out, err)


def test_up_refuses_a_dagster_yaml_that_leaves_frontier_partitions_unlimited(store_settings, tmp_path):
    home = tmp_path / "home"
    write_instance_yaml(home, partitions=2)  # written when CRAWL_TOPIC_PARTITIONS was 2
    env = {**store_settings.to_env(), "DAGSTER_HOME": str(home), "CRAWL_TOPIC_PARTITIONS": "4"}
    env.pop("KAFKA_BOOTSTRAP_SERVERS")  # the embedded broker: the check comes before it starts
    done = _up(env)
    assert done.returncode == 2
    assert done.stderr == (
        f"crawl-platform: {home / 'dagster.yaml'} limits frontier partitions 0, 1 to one run at a time, "
        "but the frontier topic has 4: add tag_concurrency_limits entries crawl/frontier_p2 … "
        "crawl/frontier_p3 with limit 1, or delete the file to have it written anew\n")


def test_up_refuses_an_existing_frontier_topic_larger_than_the_setting(settings, tmp_path):
    wide = KafkaBus.from_settings(settings.model_copy(update={"topic_partitions": 6}))
    wide.ensure_topics()
    home = tmp_path / "home"  # no dagster.yaml yet: `up` writes it for CRAWL_TOPIC_PARTITIONS=4
    done = _up({**settings.to_env(), "DAGSTER_HOME": str(home)})
    assert done.returncode == 2
    assert done.stderr == (
        f"crawl-platform: {home / 'dagster.yaml'} limits frontier partitions 0, 1, 2, 3 to one run at a time, "
        "but the frontier topic has 6: add tag_concurrency_limits entries crawl/frontier_p4 … "
        "crawl/frontier_p5 with limit 1, or delete the file to have it written anew\n")


# Started with SIGINT ignored, as a non-interactive shell starts `crawl-platform up &`: the stack
# stops a child that, like Dagster's code server, maps SIGTERM to SIGINT's handler.
BACKGROUND_STACK = """
import signal, sys, time
from pathlib import Path
from crawl_platform_dagster.processes import DagsterProcesses
signal.signal(signal.SIGINT, signal.SIG_IGN)
logs = Path(sys.argv[1])
stack = DagsterProcesses({"DAGSTER_HOME": str(logs / "home")}, logs)
logs.mkdir()
stack._spawn("code-server", [sys.executable, "-c", "from dagster._utils.interrupts import setup_interrupt_handlers\\n"
                             "setup_interrupt_handlers(); print('serving', flush=True)\\nimport time; time.sleep(60)"])
while b"serving" not in (logs / "code-server.log").read_bytes():
    time.sleep(0.05)
started = time.monotonic()
stack.stop(grace_s=20)
print(f"stopped in {time.monotonic() - started:.1f} s; SIGINT here {signal.getsignal(signal.SIGINT)!r}")
"""


def test_a_stack_started_with_sigint_ignored_still_stops_its_dagster_processes_with_sigterm(tmp_path):
    done = subprocess.run([sys.executable, "-c", BACKGROUND_STACK, str(tmp_path / "logs")],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "did not stop" not in done.stderr
    seconds = float(done.stdout.split("stopped in ")[1].split(" s")[0])
    assert seconds < 10, done.stdout  # SIGTERM ended it: no wait for the 20 s grace and a SIGKILL
    assert "Handlers.SIG_IGN" in done.stdout  # the stack's own process still ignores SIGINT
    assert "KeyboardInterrupt" in (tmp_path / "logs" / "code-server.log").read_text()


def test_a_celery_workers_config_file_names_the_broker_variables_not_their_passwords(store_settings, tmp_path):
    settings = store_settings.model_copy(update={
        "dagster_home": tmp_path / "home", "celery_broker": "pyamqp://crawler:Br0ker-pw@rabbit.internal:5672//",
        "celery_backend": "redis://:R3sult-pw@redis.internal:6379/1"})
    argv = celery_worker_argv(settings, 2)
    config_file = tmp_path / "home" / "celery.yaml"
    assert argv[argv.index("-y") + 1] == str(config_file)
    text = config_file.read_text()
    assert "Br0ker-pw" not in text
    assert "R3sult-pw" not in text
    config = json.loads(text)["execution"]["config"]
    assert (config["broker"], config["backend"]) == ({"env": "CRAWL_CELERY_BROKER"}, {"env": "CRAWL_CELERY_BACKEND"})


def test_a_worker_takes_the_fetch_queue_the_render_queue_or_both(store_settings, tmp_path):
    settings = store_settings.model_copy(update={"dagster_home": tmp_path / "home", "celery_queue": "crawl-x"})

    def queues(which: str) -> str:
        argv = celery_worker_argv(settings, 1, queues=which)
        return argv[argv.index("-q") + 1]

    assert (queues("all"), queues("fetch"), queues("render")) == ("crawl-x,crawl-x-render", "crawl-x", "crawl-x-render")


# Run in a process of its own: the definitions read CRAWL_CELERY_QUEUE when they are imported.
_QUEUES_OF_A_PROCESS = """
import json
from crawl_platform.config import Settings
from crawl_platform_dagster.definitions import defs
from crawl_platform_dagster.stack import celery_worker_argv
job = defs.get_job_def("crawl_batch_celery_job")
tags = {op.name: op.tags.get("dagster-celery/queue") for op in job.graph.iterate_op_defs()}
argv = celery_worker_argv(Settings(), 1, queues="render")
print(json.dumps({"tags": tags, "render_worker": argv[argv.index("-q") + 1]}))
"""


def test_a_render_worker_consumes_the_queue_the_definitions_tag_the_render_step_with(tmp_path):
    """dagster-celery sends a step to the queue of its op's ``dagster-celery/queue`` tag, fixed when the
    definitions load: the code server and the workers must share CRAWL_CELERY_QUEUE, and then a
    worker started with ``--queues render`` consumes exactly the render step's queue."""

    def queues(queue: str) -> dict[str, object]:
        env = {**os.environ, "CRAWL_CELERY_QUEUE": queue, "DAGSTER_HOME": str(tmp_path / queue)}
        done = subprocess.run([sys.executable, "-c", _QUEUES_OF_A_PROCESS], env=env, capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    for queue in ("crawl-a", "crawl-b"):
        seen = queues(queue)
        tagged = {name: tag for name, tag in seen["tags"].items() if tag}  # type: ignore[attr-defined]
        assert tagged == {"render_shard": f"{queue}-render"}
        assert seen["render_worker"] == f"{queue}-render"
