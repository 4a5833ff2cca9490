"""What the Dagster instance must know about the crawl: run-queue limits, pools, executor config.

The only module that knows how crawl politeness maps onto Dagster: one run tag per frontier
partition, limited to one run at a time in ``dagster.yaml`` (so two runs never fetch one host),
the writer pool of the landing and frontier steps, and the Celery executor's run config.
The sensors tag runs with :data:`PARTITION_TAG_PREFIX`, the assets take :data:`DUCKDB_WRITER_POOL`,
``crawl-platform up`` and the tests write the instance with :func:`write_instance_yaml`. It
imports no Dagster, so the CLI pays nothing for it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from crawl_platform.config import Settings
from crawl_platform_dagster.resources.settings import platform_settings

PARTITION_TAG_PREFIX = "crawl/frontier_p"
DUCKDB_WRITER_POOL = "crawl_duckdb_writer"


def partition_limits_yaml(partitions: int, indent: str = "      ") -> str:
    """``tag_concurrency_limits`` entries: one run at a time per frontier partition."""
    return "".join(f"{indent}- key: {PARTITION_TAG_PREFIX}{p}\n{indent}  limit: 1\n" for p in range(partitions))


def limited_partitions(limits: Iterable[Mapping[str, Any]] | None) -> set[int]:
    """Frontier partitions that ``tag_concurrency_limits`` entries hold to one run at a time."""
    limited = set()
    for entry in limits or []:
        key, limit = str(entry.get("key", "")), entry.get("limit")
        number = key.removeprefix(PARTITION_TAG_PREFIX)
        if key.startswith(PARTITION_TAG_PREFIX) and number.isdigit() and isinstance(limit, int) and limit <= 1:
            limited.add(int(number))
    return limited


def yaml_limited_partitions(path: Path) -> set[int]:
    """:func:`limited_partitions` of a ``dagster.yaml`` (run-queue limits in either place Dagster
    reads them from); none when the file holds none."""
    config = yaml.safe_load(path.read_text()) or {}
    runs = (config.get("concurrency") or {}).get("runs") or {}
    coordinator = (config.get("run_coordinator") or {}).get("config") or {}
    return limited_partitions([*(runs.get("tag_concurrency_limits") or []),
                               *(coordinator.get("tag_concurrency_limits") or [])])


def missing_limits_hint(missing: list[int]) -> str:
    """What to add to ``dagster.yaml`` for the frontier partitions in ``missing`` (sorted)."""
    names = [f"{PARTITION_TAG_PREFIX}{p}" for p in missing]
    if len(names) == 1:
        return f"add a tag_concurrency_limits entry {names[0]} with limit 1"
    contiguous = missing == list(range(missing[0], missing[-1] + 1))
    listed = f"{names[0]} … {names[-1]}" if contiguous else ", ".join(names)
    return f"add tag_concurrency_limits entries {listed} with limit 1"


CUSTOM_PARTS = ("launcher", "coordinator", "storage")
"""The instance parts the platform brings (docs/dagster.md, "What the custom instance parts add"):
the fork run launcher, the quick queued run coordinator, the pooled instance storage."""


def write_instance_yaml(home: Path, postgres_url: str | None = None, max_concurrent_runs: int = 4,
                        partitions: int = 8, writer_pool_limit: int | None = None,
                        stock: Collection[str] = ()) -> Path:
    """Write ``dagster.yaml``: queued runs, one run per frontier partition at a time, and
    ``writer_pool_limit`` lake writer steps at once (the ``crawl_duckdb_writer`` pool; by default
    one per run slot, and the lake's lock orders them). The parts of :data:`CUSTOM_PARTS` named in
    ``stock`` are left to Dagster's defaults: ``DefaultRunLauncher``, its queued run coordinator,
    its own SQLite or PostgreSQL storage. The crawl is correct with any of them."""
    unknown = set(stock) - set(CUSTOM_PARTS)
    if unknown:
        raise ValueError(f"no custom instance part {', '.join(sorted(unknown))}; "
                         f"the parts are {', '.join(CUSTOM_PARTS)}")
    home.mkdir(parents=True, exist_ok=True)
    if postgres_url and postgres_url.startswith("postgresql://"):
        # SQLAlchemy 2.1 picks psycopg 3 for a bare postgresql:// URL; dagster-postgres needs psycopg2.
        postgres_url = "postgresql+psycopg2://" + postgres_url.removeprefix("postgresql://")
    if "storage" in stock:
        storage = (f"# Dagster's own storage on PostgreSQL.\nstorage:\n  postgres:\n"
                   f"    postgres_url: \"{postgres_url}\"\n" if postgres_url
                   else "# Dagster's own storage: SQLite files in this folder.\n")
    elif postgres_url:
        storage = ("# Dagster's PostgreSQL storage, holding its connections open (crawl_platform_dagster/storage.py).\n"
                   "storage:\n  custom:\n    module: crawl_platform_dagster.storage\n    class: PooledPostgresStorage\n"
                   f"    config:\n      postgres_url: \"{postgres_url}\"\n")
    else:
        storage = ("# Dagster's SQLite storage in this folder (history/, schedules/), without a new connection\n"
                   "# per statement (crawl_platform_dagster/storage_sqlite.py). Moving the folder? Change base_dir.\n"
                   "storage:\n  custom:\n    module: crawl_platform_dagster.storage_sqlite\n"
                   "    class: PooledSqliteStorage\n"
                   f"    config:\n      base_dir: {json.dumps(str(home.resolve()))}\n")
    launcher = """\
# Each run is a fork of a warm process that already imported Dagster and the definitions
# (crawl_platform_dagster/launcher.py): no interpreter start or imports per run.
run_launcher:
  module: crawl_platform_dagster.launcher
  class: ForkRunLauncher
"""
    if "launcher" in stock:
        launcher = "# Dagster's DefaultRunLauncher: each run a new process of the code server.\n"
    coordinator = """\
# Dagster's queued run coordinator, with a pass over the queue every half second: a one-host
# crawl's batch runs follow one another, each waiting for the pass after the previous one ended
# (crawl_platform_dagster/coordinator.py).
run_coordinator:
  module: crawl_platform_dagster.coordinator
  class: QuickQueuedRunCoordinator
  config:
    dequeue_interval_seconds: 0.5
    # Launch queued runs side by side: a launch waits until the new run process has imported
    # the code (seconds), so one at a time would start four runs one after another.
    dequeue_use_threads: true
    dequeue_num_workers: 4
"""
    if "coordinator" in stock:
        coordinator = "# Dagster's queued run coordinator, as it comes.\n"
    path = home / "dagster.yaml"
    path.write_text(
        f"""# Written by crawl-platform; edit freely, it is not overwritten.
{storage}{launcher}{coordinator}concurrency:
  runs:
    max_concurrent_runs: {max_concurrent_runs}
    tag_concurrency_limits:
      # One run per Kafka frontier partition at a time (a batch run carries one tag per partition
      # it reads): a host's URLs live in one partition, so this holds per-host politeness across
      # concurrent runs.
{partition_limits_yaml(partitions)}  pools:
    # Pools without a limit of their own; the only pool is {DUCKDB_WRITER_POOL} (landing, frontier and
    # maintenance steps). The lake's write lock already makes writers take turns, so the pool
    # lets as many in as runs can be at once: at limit 1 the polite broad crawl lands more slowly
    # (see docs/benchmarks.md). Lower it to make writer steps wait in Dagster, not on the lock.
    default_limit: {writer_pool_limit or max_concurrent_runs}
    granularity: op
run_monitoring:
  enabled: true
  poll_interval_seconds: 5
  max_resume_run_attempts: 0
  # A run whose worker died before it started is failed after this long (then retried).
  start_timeout_seconds: 60
  # A failed or killed run gives its pool slot back after this long.
  free_slots_after_run_end_seconds: 15
run_retries:
  enabled: true
  max_retries: 2
sensors:
  use_threads: true
  num_workers: 4
telemetry:
  enabled: false
# A fresh UI opens on the platform's assets, not on Dagster's community sign-up dialog.
nux:
  enabled: false
"""
    )
    return path


def render_queue(settings: Settings) -> str:
    """The Celery queue of the render steps: the deployment's queue with ``-render``."""
    return f"{settings.celery_queue}-render"


def render_step_tags() -> dict[str, str]:
    """The render step's op tags: its Celery queue. dagster-celery takes a step's queue only from
    its op's tags, which are fixed when the op is defined, so this reads the settings of the
    environment the definitions load in (every process of a deployment shares them)."""
    return {"dagster-celery/queue": render_queue(platform_settings())}


def celery_run_config(settings: Settings) -> dict[str, object]:
    """Executor run config of the Celery job (and of its workers): a lost worker's task goes to
    another worker. The UI shows every run's config, and the broker and backend URLs hold their
    password, so the config names their environment variables (Dagster reads ``{"env": VAR}``
    where the run and the workers execute, and their environment sets the platform's settings)."""
    return {"execution": {"config": {
        "broker": _environment_reference(settings, "celery_broker"),
        "backend": _environment_reference(settings, "celery_backend"),
        "config_source": {"task_acks_late": True, "task_reject_on_worker_lost": True,
                          "worker_prefetch_multiplier": 1, "task_default_queue": settings.celery_queue},
    }}}


def _environment_reference(settings: Settings, name: str) -> object:
    """``{"env": VAR}`` for the setting ``name``, or its documented default as it is: a process
    that keeps the default need not have the variable set, and the default holds no secret."""
    value = getattr(settings, name)
    if value == type(settings).model_fields[name].default:
        return value
    return {"env": type(settings).env_var(name)}
