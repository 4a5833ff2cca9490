"""Settings of the crawl loop's runs: how batches are cut, how long a run goes on, where its steps
execute (in the run's process or on Celery workers).

Part of :class:`crawl_platform.config.Settings`; the sensors and :mod:`crawl_platform.pipeline`
read them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BeforeValidator, Field
from pydantic_settings import BaseSettings

from crawl_platform.config.storage import folder_location


class RunSettings(BaseSettings):
    """Batching (sizes, groups, continuation, shards, the sensor loop) and the executor."""

    batch_size: int = Field(
        0, ge=0, validation_alias=AliasChoices("CRAWL_BATCH_SIZE", "batch_size"),
        description="Most frontier messages a run takes from each of its partitions. A run takes what is "
        "waiting up to this, so batches are small when the backlog is small and grow with it. `0` (auto): "
        "as many requests as one host serves in `CRAWL_BATCH_SECONDS` at `CRAWL_HOST_DELAY_MS` (at least "
        "10 ms each), times the hosts a partition holds (hosts with queued URLs over "
        "`CRAWL_TOPIC_PARTITIONS`, at least one: a partition's hosts are fetched side by side), kept between "
        "100 and 5,000: e.g. 480 for one host at the default 250 ms, 5,000 for 500 hosts over 8 partitions, "
        "and 5,000 with no delay.",
    )
    batch_seconds: float = Field(
        120.0, gt=0, validation_alias=AliasChoices("CRAWL_BATCH_SECONDS", "batch_seconds"),
        description="Target fetch time of one batch run when `CRAWL_BATCH_SIZE` is 0 (auto).",
    )
    batch_groups: int = Field(
        4, ge=1, validation_alias=AliasChoices("CRAWL_BATCH_GROUPS", "batch_groups"),
        description="Frontier partitions form this many groups (partition mod groups), and a batch run "
        "covers one group's partitions. Up to this many batch runs fetch side by side, each over the hosts "
        "of several partitions, and two runs never share a partition, so never a host.",
    )
    run_continue_s: float = Field(
        60.0, ge=0, le=3600, validation_alias=AliasChoices("CRAWL_RUN_CONTINUE_S", "run_continue_s"),
        description="A batch run the frontier sensor started goes on to its partitions' next batches by "
        "itself, for up to this many seconds: it reads what arrived on its partitions after its batch (mostly "
        "its own new links), fetches, lands and expands it in its frontier step, and so on until they hold "
        "nothing new. Each next batch is a partition of its own, materialised by that run with the same "
        "metadata, so it can be materialised again like any other. A next batch then costs no sensor pass "
        "and no run start. While such a run is queued or running, the sensor cuts nothing from its "
        "partitions, and it moves its cursor past the batches they landed (`batch_ranges` in the lake). `0`: "
        "one batch per run, the sensor queuing runs ahead. Off on Celery, where a run's fetch fans out over "
        "workers; at most half of `CRAWL_RUN_TIMEOUT`.",
    )
    land_every_s: float = Field(
        2.0, ge=0, le=3600, validation_alias=AliasChoices("CRAWL_LAND_EVERY_S", "land_every_s"),
        description="A fetch step that is still fetching after this many seconds lands the pages it has "
        "fetched so far, again every this many seconds, and once more when its fetch is over: each round is "
        "a lake commit of their `pages`, `documents` and `links` rows (and a WARC file of their responses), "
        "so a fetched page is readable within seconds at any politeness, not when its whole batch lands. The "
        "batch's landing writes the rest and its items. Pages of crawls that render land with the batch. A "
        "step that fetches in less lands with its batch alone. Lower: fresher pages, more commits and small "
        "files for lake maintenance to merge. `0`: every page lands with its batch.",
    )
    batch_max_bytes: int = Field(
        256 * 1024 * 1024, ge=1, validation_alias=AliasChoices("CRAWL_BATCH_MAX_BYTES", "batch_max_bytes"),
        description="Most bytes of bodies one batch holds in memory (256 MiB). Once its fetch has read this "
        "much it starts no new request (those in flight finish, each within `CRAWL_MAX_BODY_BYTES`), and "
        "the URLs it did not reach land as `postponed` items and are published again for a later batch: "
        "nothing is lost, and a batch of huge pages cannot take a run's memory. A batch's fetch steps "
        "share it.",
    )
    fetch_shards: int = Field(
        0, ge=0, validation_alias=AliasChoices("CRAWL_FETCH_SHARDS", "fetch_shards"),
        description="Fetch steps a batch run fans out into, each over whole hosts. `0`: 1 on the in-process "
        "executor (its hosts are fetched in parallel threads anyway), 4 on Celery.",
    )
    handoff_dir: Annotated[str, BeforeValidator(folder_location)] = Field(
        "data/handoff", validation_alias=AliasChoices("CRAWL_HANDOFF_DIR", "handoff_dir"),
        description="Where a run's fetch steps hand their pages to its landing step (pickles, removed once "
        "the batch has landed): a local path, or `s3://bucket/prefix/` (docs/storage.md), which Celery "
        "workers on several machines all reach without a shared file system.",
    )
    max_runs_per_tick: int = Field(
        16, ge=1, validation_alias=AliasChoices("CRAWL_MAX_RUNS_PER_TICK", "max_runs_per_tick"),
        description="Most batch runs one frontier-sensor tick requests.",
    )
    max_queued_runs: int = Field(
        32, ge=1, validation_alias=AliasChoices("CRAWL_MAX_QUEUED_RUNS", "max_queued_runs"),
        description="The frontier sensor adds no batch runs while this many are waiting to start.",
    )
    sensor_loop_s: float = Field(
        1.0, ge=0.2, le=30, validation_alias=AliasChoices("CRAWL_SENSOR_LOOP_S", "sensor_loop_s"),
        description="Seconds between the Dagster daemon's passes over the sensors. Dagster's own daemon "
        "waits 5 s, which puts up to 5 s before a submitted crawl is registered and again before its first "
        "batch starts; the seeds and frontier sensors ask for a pass every second, and each sensor still "
        "waits its minimum interval. Read when the daemon starts (`python -m crawl_platform_dagster.daemon`, "
        "which `up` runs).",
    )

    # --- Execution (scale-out profile) ---------------------------------------------------------
    executor: Literal["in_process", "celery"] = Field(
        "in_process", validation_alias=AliasChoices("CRAWL_EXECUTOR", "executor"),
        description="`in_process`: a batch run's steps run in its own process. `celery`: they run on Celery "
        "workers (`crawl-platform worker`, docs/deployment.md). The frontier sensor reads it on every tick.",
    )
    run_timeout_s: int = Field(
        900, ge=10, validation_alias=AliasChoices("CRAWL_RUN_TIMEOUT", "run_timeout_s"),
        description="A batch run still going after this many seconds is failed by run monitoring, because "
        "its worker died, and then retried by run retries. Its batch still lands once.",
    )
    celery_broker: str = Field(
        "pyamqp://guest:guest@127.0.0.1:5672//",
        validation_alias=AliasChoices("CRAWL_CELERY_BROKER", "celery_broker"), repr=False,
        description="Celery broker: RabbitMQ (`pyamqp://...`) or Redis (`redis://...`). Its password is a "
        "secret: a batch run's config names this variable, and the run and the workers read it from their "
        "environment.",
    )
    celery_queue: str = Field(
        "crawl-platform", validation_alias=AliasChoices("CRAWL_CELERY_QUEUE", "celery_queue"),
        description="Celery queue of this deployment's batch steps; the render steps go to `<this>-render`. Its "
        "workers consume only these queues, so deployments sharing a broker stay apart. The render step's "
        "queue is fixed when the definitions load (dagster-celery takes a step's queue only from its op's "
        "tags): the code server (`up`, or `dagster api grpc`) and every worker must have the same value.",
    )
    celery_backend: str = Field(
        "rpc://", validation_alias=AliasChoices("CRAWL_CELERY_BACKEND", "celery_backend"), repr=False,
        description="Celery result backend: `rpc://` with RabbitMQ, `redis://...` with Redis; a secret like "
        "the broker URL.",
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
