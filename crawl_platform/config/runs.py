"""Settings of the crawl loop's runs: how batches are cut, how long a run goes on, where its steps
execute (in the run's process or on Celery workers).

Part of :class:`crawl_platform.config.Settings`; the sensors and :mod:`crawl_platform.pipeline`
read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings


class RunSettings(BaseSettings):
    """Batching (sizes, groups, continuation, shards, the sensor loop) and the executor."""

    batch_size: int = Field(
        0, ge=0, validation_alias=AliasChoices("CRAWL_BATCH_SIZE", "batch_size"),
        description="Most frontier messages a run takes from each of its partitions; a run takes what "
        "is waiting up to this, so batches are small when the backlog is and grow with it. 0: "
        "CRAWL_BATCH_SECONDS worth of requests at CRAWL_HOST_DELAY_MS to each host a partition holds "
        "(the hosts with queued URLs over the partitions), between 100 and 5000.",
    )
    batch_seconds: float = Field(
        120.0, gt=0, validation_alias=AliasChoices("CRAWL_BATCH_SECONDS", "batch_seconds"),
        description="Target fetch time of one run when CRAWL_BATCH_SIZE is 0 (auto).",
    )
    batch_groups: int = Field(
        4, ge=1, validation_alias=AliasChoices("CRAWL_BATCH_GROUPS", "batch_groups"),
        description="Frontier partitions are split into this many groups (partition % groups); a run "
        "covers one group, so this many batch runs fetch side by side, each over several partitions' hosts.",
    )
    run_continue_s: float = Field(
        60.0, ge=0, le=3600, validation_alias=AliasChoices("CRAWL_RUN_CONTINUE_S", "run_continue_s"),
        description="A batch run goes on to its partitions' next batch by itself, in its own process, "
        "for up to this many seconds, instead of a sensor pass and a run start per batch; 0: one batch "
        "per run. Not on the Celery executor, where a run's fetch fans out over workers.",
    )
    batch_max_bytes: int = Field(
        256 * 1024 * 1024, ge=1, validation_alias=AliasChoices("CRAWL_BATCH_MAX_BYTES", "batch_max_bytes"),
        description="Most bytes of bodies one batch holds in memory: once its fetch has read this much it "
        "starts no new request, and the URLs it did not fetch are published again for a later batch "
        "(batch_items.outcome 'postponed'). A batch's fetch steps share it.",
    )
    fetch_shards: int = Field(
        0, ge=0, validation_alias=AliasChoices("CRAWL_FETCH_SHARDS", "fetch_shards"),
        description="Fetch steps a batch run fans out into, each over whole hosts. 0: 1 on the in-process "
        "executor (its hosts are fetched in parallel threads anyway), 4 on Celery.",
    )
    handoff_dir: Path = Field(
        Path("data/handoff"), validation_alias=AliasChoices("CRAWL_HANDOFF_DIR", "handoff_dir"),
        description="Where a run's steps hand fetched pages to its landing step (pickles, removed once "
        "the batch landed). Shared storage when Celery workers run on other machines.",
    )
    max_runs_per_tick: int = Field(
        16, ge=1, validation_alias=AliasChoices("CRAWL_MAX_RUNS_PER_TICK", "max_runs_per_tick")
    )
    max_queued_runs: int = Field(
        32, ge=1, validation_alias=AliasChoices("CRAWL_MAX_QUEUED_RUNS", "max_queued_runs"),
        description="The frontier sensor adds no batch runs while this many are waiting to start.",
    )
    sensor_loop_s: float = Field(
        1.0, ge=0.2, le=30, validation_alias=AliasChoices("CRAWL_SENSOR_LOOP_S", "sensor_loop_s"),
        description="Seconds between the Dagster daemon's passes over the sensors (Dagster's own is 5 s); "
        "each sensor still waits its minimum interval. Read by crawl_platform_dagster.daemon at start.",
    )

    # --- Execution (scale-out profile) ---------------------------------------------------------
    executor: Literal["in_process", "celery"] = Field(
        "in_process", validation_alias=AliasChoices("CRAWL_EXECUTOR", "executor"),
        description="Where batch runs execute their steps: in the run's process, or on Celery workers.",
    )
    run_timeout_s: int = Field(
        900, ge=10, validation_alias=AliasChoices("CRAWL_RUN_TIMEOUT", "run_timeout_s"),
        description="A batch run still going after this many seconds is failed by run monitoring (its "
        "worker died) and retried by run retries; its batch lands once.",
    )
    celery_broker: str = Field(
        "pyamqp://guest:guest@127.0.0.1:5672//",
        validation_alias=AliasChoices("CRAWL_CELERY_BROKER", "celery_broker"), repr=False,
        description="Celery broker URL (RabbitMQ pyamqp://… or Redis redis://…). Its password is a secret: "
        "a batch run's config names this variable, and the run and the workers read it from their environment.",
    )
    celery_queue: str = Field(
        "crawl-platform", validation_alias=AliasChoices("CRAWL_CELERY_QUEUE", "celery_queue"),
        description="Celery queue of this deployment's batch steps; its workers consume only this queue.",
    )
    celery_backend: str = Field(
        "rpc://", validation_alias=AliasChoices("CRAWL_CELERY_BACKEND", "celery_backend"), repr=False,
        description="Celery result backend (rpc:// with RabbitMQ, or redis://…); a secret like the broker URL.",
    )

    def continue_seconds(self) -> float:
        """How long a sensor-started batch run goes on to its partitions' next batches
        (``CRAWL_RUN_CONTINUE_S``; 0 on Celery), always well inside the run timeout."""
        if self.executor == "celery":
            return 0.0
        return min(self.run_continue_s, self.run_timeout_s / 2)

    def shard_count(self) -> int:
        """Fetch shards per batch run (``CRAWL_FETCH_SHARDS``, or its default for the executor)."""
        if self.fetch_shards:
            return self.fetch_shards
        return 4 if self.executor == "celery" else 1
