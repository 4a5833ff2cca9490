"""CPU of one ``crawl-platform crawl URL`` (no ``--wait``): start, register the crawl in the lake,
publish its seed. What a user, a script or a scheduler pays per submitted crawl.

An embedded broker and a new lake in a temporary folder; ``--calls`` calls, each its own process
with its own topics, and the CPU of each (user and system, from ``RUSAGE_CHILDREN``). With
``--compare DIR`` another checkout's CLI runs in turn with this one's, each on a lake of its own:

    git worktree add /tmp/before a9ce1b5
    .venv/bin/python benchmarks/cli_cost.py --calls 6 --compare /tmp/before
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from crawl_platform.bus.broker import EmbeddedBroker
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore


def one_call(repo: Path, lake: Path, tmp: Path, bootstrap: str) -> float:
    tag = uuid.uuid4().hex[:8]
    env = {**os.environ, "PYTHONPATH": str(repo), "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
           "CRAWL_LAKE_PATH": str(lake), "DAGSTER_HOME": str(tmp / "dagster_home"),
           "CRAWL_SEEDS_TOPIC": f"seeds-{tag}", "CRAWL_FRONTIER_TOPIC": f"frontier-{tag}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "crawl_platform.cli.main", "crawl", f"http://example.com/{tag}",
                           "--crawl-id", tag], env=env, cwd=repo, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"cli_cost.py: crawl in {repo} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5, help="calls per checkout (5)")
    parser.add_argument("--compare", type=Path, help="another checkout, measured in turn with this one")
    args = parser.parse_args()
    repos = {"this checkout": REPO, **({str(args.compare): args.compare.resolve()} if args.compare else {})}
    cpu: dict[str, list[float]] = {name: [] for name in repos}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        lakes = {name: tmp / f"lake-{i}" for i, name in enumerate(repos)}
        for lake in lakes.values():
            CrawlStore.from_settings(Settings(lake_path=lake, dagster_home=tmp / "dagster_home")).ensure_schema()
        with EmbeddedBroker(port=0, log_path=tmp / "tansu.log") as broker:
            for _ in range(args.calls):
                for name, repo in repos.items():
                    cpu[name].append(one_call(repo, lakes[name], tmp, broker.bootstrap_servers))
    for name, seconds in cpu.items():
        ordered = sorted(seconds)
        print(f"{name}: `crawl URL` {ordered[len(ordered) // 2]:.3f} CPU s (median of {len(seconds)}: "
              f"{', '.join(f'{s:.3f}' for s in seconds)})")


if __name__ == "__main__":
    main()
