"""The installed ``crawl-platform`` script: the engine's commands plus the two that start Dagster.

``up`` runs the embedded stack and ``worker`` a Celery worker (:mod:`crawl_platform_dagster.stack`);
every other command is the engine's (:mod:`crawl_platform.cli.main`). The stack module is imported
only when one of these two runs, so ``crawl`` and ``status`` stay light.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from crawl_platform.cli.main import Command
from crawl_platform.cli.main import main as engine_main
from crawl_platform.config import Settings


def _up_arguments(up: argparse.ArgumentParser) -> None:
    up.add_argument("--no-demo", action="store_true", help="do not serve and crawl the bundled demo site")
    up.add_argument("--port", type=int, default=3000, help="Dagster webserver port on 127.0.0.1 (3000)")
    up.add_argument("--demo-pages", type=int, default=300, help="pages of the demo site (300)")
    up.add_argument("--broker-port", type=int, default=0,
                    help="port of the embedded broker (default: the one in KAFKA_BOOTSTRAP_SERVERS' default, 19092)")


def _up(settings: Settings, args: argparse.Namespace) -> int:
    from crawl_platform_dagster.stack import run_stack  # noqa: PLC0415 - only `up` starts processes

    return run_stack(settings, args.port, demo_pages=0 if args.no_demo else args.demo_pages,
                     broker_port=args.broker_port)


def _worker_arguments(worker: argparse.ArgumentParser) -> None:
    worker.add_argument("--concurrency", type=int, default=2, help="steps run at once by this worker (2)")
    worker.add_argument("--queues", choices=("all", "fetch", "render"), default="all",
                        help="which steps: fetch (every batch step but rendering), render (only the render "
                        "steps, which start browsers) or all (both)")


def _worker(settings: Settings, args: argparse.Namespace) -> int:
    from crawl_platform_dagster.stack import run_worker  # noqa: PLC0415 - only `worker` starts processes

    return run_worker(settings, args.concurrency, args.queues)


COMMANDS = {
    "up": Command("run the embedded stack (broker, Dagster webserver+daemon, demo site)", _up_arguments, _up),
    "worker": Command("run a Celery worker for the scale-out profile (CRAWL_EXECUTOR=celery)",
                      _worker_arguments, _worker),
}


def main(argv: Sequence[str] | None = None) -> int:
    return engine_main(argv, extra_commands=COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
