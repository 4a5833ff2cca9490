"""``dagster-daemon``, with a faster sensor loop and the run launcher's fork server started first.

``python -m crawl_platform_dagster.daemon run …`` takes exactly ``dagster-daemon``'s arguments and
hands over to it after two things that cut the time from a submitted seed to its first row:

- **The fork server starts with the daemon.** :class:`~crawl_platform_dagster.launcher.ForkRunLauncher`
  forks every run from a fork server that imports the definitions and the lake's DuckDB
  extensions once, seconds of imports. Dagster creates an instance's run launcher only when the
  first run is launched, so the first run of a new stack would wait for all of them, and a new
  stack's first crawl would take much longer from seed to first row (``benchmarks/compare.py``
  reports it). Here the launcher is created
  once before the daemon starts and, when it is a :class:`ForkRunLauncher`, its fork server is
  started and imports while the daemon starts up. Python's ``multiprocessing`` keeps one fork server
  per process, so the launcher the daemon creates later forks from the same one. Once the server
  has imported everything the daemon prints :data:`WARM_MESSAGE`;
  ``crawl-platform up`` waits for it before it says the stack is ready.
- **The sensor loop is ``CRAWL_SENSOR_LOOP_S`` (1 s).** Dagster's sensor daemon passes over the
  sensors every 5 s (``MIN_INTERVAL_LOOP_TIME`` of its sensor module, a constant with no setting;
  :func:`crawl_platform_dagster.dagster_internals.sensor_daemon`), whatever a sensor's
  ``minimum_interval_seconds``. A crawl waits for two sensors in turn (seeds, then frontier) and
  each new link level for the frontier sensor again, so that loop
  would cost up to 5 s at each step. Each sensor still waits its own minimum interval, counted
  from its last tick's start, which comes a few milliseconds into a pass: with passes exactly 1 s
  apart, a one-second sensor would often not yet be due at the next pass and tick 2 s later. A
  pass therefore comes ``LOOP_MARGIN_S`` later than the setting says, so that such a sensor ticks
  at every pass.

``crawl-platform up``, the tests and the benchmarks start the daemon this way; plain
``dagster-daemon run`` still works, with Dagster's 5 s loop and a first run that waits for the
imports.
"""

from __future__ import annotations

import sys

WARM_MESSAGE = "crawl-platform: the run fork server is warm"
"""What the daemon prints once its fork server has imported everything (``crawl-platform up`` and
the benchmarks wait for it): from then on a run starts without waiting for imports."""


def start_fork_server() -> bool:
    """Start the fork server of the instance's run launcher, if it is a :class:`ForkRunLauncher`;
    True when one was started."""
    from dagster import DagsterInstance  # noqa: PLC0415 - only the daemon's process imports this module

    from crawl_platform_dagster.launcher import ForkRunLauncher  # noqa: PLC0415

    def announce(seconds: float) -> None:
        print(f"{WARM_MESSAGE} ({seconds:.1f} s after the daemon started it)", file=sys.stderr, flush=True)

    with DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        if not isinstance(launcher, ForkRunLauncher):
            return False
        launcher.start_fork_server(announce)
        return True


LOOP_MARGIN_S = 0.05


def set_sensor_loop(seconds: float) -> None:
    """Make the sensor daemon pass over the sensors every ``seconds`` (Dagster's constant is 5),
    plus :data:`LOOP_MARGIN_S`, so that a sensor whose minimum interval is ``seconds`` is due at
    every pass."""
    from crawl_platform_dagster.dagster_internals import sensor_daemon  # noqa: PLC0415 - the daemon's alone

    module = sensor_daemon()
    if not hasattr(module, "MIN_INTERVAL_LOOP_TIME"):  # a Dagster without the constant: its own loop
        return
    module.MIN_INTERVAL_LOOP_TIME = seconds + LOOP_MARGIN_S  # type: ignore[attr-defined]  # read on every pass


def main() -> None:
    from crawl_platform.config import Settings  # noqa: PLC0415

    set_sensor_loop(Settings().sensor_loop_s)
    start_fork_server()
    from crawl_platform_dagster.dagster_internals import run_daemon_cli  # noqa: PLC0415

    sys.argv[0] = "dagster-daemon"
    run_daemon_cli()


if __name__ == "__main__":
    main()
