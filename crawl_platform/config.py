"""One typed settings object for the whole platform.

Every knob the engine, the Dagster layer and the CLI read lives here, with the environment
variable that sets it. Nothing else in the code base calls ``os.getenv``: components take plain
values in ``__init__`` and a ``from_settings`` classmethod wires them from this object.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

Scope = Literal["host", "domain", "any"]  # the one list of crawl scopes; others use get_args(Scope)


_MEMORY_SIZE = re.compile(r"\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)", re.IGNORECASE)


def _memory_size(value: str) -> str:
    """A size DuckDB reads, such as 256MB or 2GB (stripped), else a one-line error."""
    if not _MEMORY_SIZE.fullmatch(value.strip()):
        raise ValueError("a size such as 256MB or 2GB")
    return value.strip()


class Settings(BaseSettings):
    """Platform settings; each field is read from the environment variable named in its alias."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # --- Kafka bus -------------------------------------------------------------------------
    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:19092",
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "kafka_bootstrap_servers"),
        description="Kafka bootstrap servers. `crawl-platform up` starts the embedded broker here "
        "unless KAFKA_BOOTSTRAP_SERVERS is set explicitly.",
    )
    kafka_client_config: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("KAFKA_CLIENT_CONFIG", "kafka_client_config"),
        description="Extra librdkafka settings as JSON (security.protocol, sasl.*, ssl.*), "
        "passed to every producer, consumer and admin client.",
    )
    kafka_producer_config: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("KAFKA_PRODUCER_CONFIG", "kafka_producer_config"),
        description="Extra librdkafka producer settings as JSON. With the embedded Tansu 0.6 broker "
        'use {"batch.num.messages": "1"} (`up` and the tests do): Tansu reports a wrong high '
        "watermark for multi-record batches, and the sensors cut batches by watermark.",
    )
    seeds_topic: str = Field("crawl.seeds", validation_alias=AliasChoices("CRAWL_SEEDS_TOPIC", "seeds_topic"))
    frontier_topic: str = Field(
        "crawl.frontier", validation_alias=AliasChoices("CRAWL_FRONTIER_TOPIC", "frontier_topic")
    )
    dead_letter_topic: str = Field(
        "crawl.dead-letter", validation_alias=AliasChoices("CRAWL_DEAD_LETTER_TOPIC", "dead_letter_topic")
    )
    pages_topic: str = Field(
        "crawl.pages", validation_alias=AliasChoices("CRAWL_PAGES_TOPIC", "pages_topic"),
        description="Topic of page events: one message per landed page version, keyed by URL, "
        "published after the landing commits (at least once).",
    )
    page_events: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_PAGE_EVENTS", "page_events"),
        description="Publish page events on CRAWL_PAGES_TOPIC (false: the topic stays empty).",
    )
    control_topic: str = Field(
        "crawl.control", validation_alias=AliasChoices("CRAWL_CONTROL_TOPIC", "control_topic"),
        description="Topic of control commands (cancel, pause, resume a crawl), keyed by crawl id.",
    )
    topic_partitions: int = Field(
        8, ge=1, validation_alias=AliasChoices("CRAWL_TOPIC_PARTITIONS", "topic_partitions")
    )

    # --- Storage -------------------------------------------------------------------------------
    lake_path: Path = Field(
        Path("data/lake"), validation_alias=AliasChoices("CRAWL_LAKE_PATH", "lake_path"),
        description="Folder of the embedded lake: its SQLite catalog (catalog.sqlite) and its Parquet "
        "data files (data/), unless CRAWL_LAKE_CATALOG or CRAWL_LAKE_DATA_PATH say otherwise.",
    )
    lake_catalog: str = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_CATALOG", "lake_catalog"),
        description="The lake's catalog: empty for the embedded SQLite file under CRAWL_LAKE_PATH, "
        "sqlite:PATH for another file, or postgres:DSN (e.g. postgres:dbname=crawl host=pg.internal "
        "user=crawler) for a catalog every machine shares.",
    )
    lake_data_path: str = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_DATA_PATH", "lake_data_path"),
        description="Where the lake's Parquet files live: empty for CRAWL_LAKE_PATH/data, or a folder "
        "every worker reaches (a shared mount; s3://bucket/prefix/ with the httpfs extension).",
    )
    lake_write_timeout_s: float = Field(
        120.0, gt=0, validation_alias=AliasChoices("CRAWL_LAKE_WRITE_TIMEOUT", "lake_write_timeout_s"),
        description="How long a writer waits for the lake's write lock (writers take turns; readers "
        "never wait).",
    )
    lake_memory_limit: Annotated[str, AfterValidator(_memory_size)] = Field(
        "1GB",
        validation_alias=AliasChoices("CRAWL_LAKE_MEMORY_LIMIT", "lake_memory_limit"),
        description="DuckDB's memory limit in each process that opens the lake (e.g. 1GB, 512MB): its "
        "cache of what it read stays under it, and a query needing more spills to a temporary folder.",
    )
    lake_retention_days: int = Field(
        7, ge=0, validation_alias=AliasChoices("CRAWL_LAKE_RETENTION_DAYS", "lake_retention_days"),
        description="Days of lake snapshots lake maintenance keeps for time travel; older snapshots are "
        "expired and the files only they referenced are removed.",
    )
    lake_backup_path: str = Field(
        "", validation_alias=AliasChoices("CRAWL_LAKE_BACKUP_PATH", "lake_backup_path"),
        description="Folder lake_backup_job writes backups into (one folder per backup, "
        "<snapshot>-<UTC time>); empty for backups/ next to CRAWL_LAKE_PATH.",
    )
    archive_path: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ARCHIVE_PATH", "archive_path"),
        description="Folder of the raw archive, the gzip WARC files the fetch steps write (pages.warc_file "
        "is relative to it); empty for archive/ in CRAWL_LAKE_PATH. A local or mounted folder every "
        "worker reaches (object storage is not supported).",
    )
    archive_responses: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_ARCHIVE", "archive_responses"),
        description="Write every fetched response to the raw archive (false: pages get NULL warc_* "
        "columns, and `show`, `export --format warc` and re-parsing have nothing to read).",
    )
    dagster_home: Path = Field(
        Path("data/dagster_home"), validation_alias=AliasChoices("DAGSTER_HOME", "dagster_home")
    )

    # --- Batching ------------------------------------------------------------------------------
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
        description="A batch run goes on to its partitions' next link level by itself, in its own process, "
        "for up to this many seconds, instead of a sensor pass and a run start per level; 0: one batch "
        "per run. Not on the Celery executor, where a run's fetch fans out over workers.",
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
        validation_alias=AliasChoices("CRAWL_CELERY_BROKER", "celery_broker"),
        description="Celery broker URL (RabbitMQ pyamqp://… or Redis redis://…).",
    )
    celery_queue: str = Field(
        "crawl-platform", validation_alias=AliasChoices("CRAWL_CELERY_QUEUE", "celery_queue"),
        description="Celery queue of this deployment's batch steps; its workers consume only this queue.",
    )
    celery_backend: str = Field(
        "rpc://", validation_alias=AliasChoices("CRAWL_CELERY_BACKEND", "celery_backend"),
        description="Celery result backend (rpc:// with RabbitMQ, or redis://…).",
    )

    # --- Fetching ------------------------------------------------------------------------------
    user_agent: str = Field(
        "crawl-platform/0.1 (+https://github.com/crawl-platform)",
        validation_alias=AliasChoices("CRAWL_USER_AGENT", "user_agent"),
    )
    fetch_concurrency: int = Field(
        16, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_CONCURRENCY", "fetch_concurrency"),
        description="Requests in flight at once inside one run (fetch worker threads). A worker takes "
        "whichever host's turn comes first, so a host waiting out its delay holds no worker.",
    )
    host_concurrency: int = Field(
        1, ge=1, le=64, validation_alias=AliasChoices("CRAWL_HOST_CONCURRENCY", "host_concurrency"),
        description="Requests one host may have in flight. Above 1 only while the host is healthy: a "
        "host that answers slowly, with 429/503 or asks a Crawl-delay gets one at a time again.",
    )
    host_delay_ms: int = Field(
        250, ge=0, validation_alias=AliasChoices("CRAWL_HOST_DELAY_MS", "host_delay_ms"),
        description="Minimum gap between two requests to the same host.",
    )
    min_host_delay_ms: int = Field(
        100, ge=0, validation_alias=AliasChoices("CRAWL_MIN_HOST_DELAY_MS", "min_host_delay_ms"),
        description="Floor of a crawl's own host delay (crawl --host-delay-ms): a crawl asking for less "
        "gets this. Crawls that ask for none use CRAWL_HOST_DELAY_MS.",
    )
    max_requests_per_host: int = Field(
        4, ge=1, le=64, validation_alias=AliasChoices("CRAWL_MAX_REQUESTS_PER_HOST", "max_requests_per_host"),
        description="Cap on a crawl's own requests in flight per host (crawl --host-concurrency).",
    )
    max_priority: int = Field(
        10, ge=0, validation_alias=AliasChoices("CRAWL_MAX_PRIORITY", "max_priority"),
        description="Cap on a crawl's priority (crawl --priority); the frontier sensor clamps to it.",
    )
    connect_timeout_s: float = Field(
        5.0, gt=0, validation_alias=AliasChoices("CRAWL_CONNECT_TIMEOUT", "connect_timeout_s")
    )
    read_timeout_s: float = Field(
        15.0, gt=0, validation_alias=AliasChoices("CRAWL_READ_TIMEOUT", "read_timeout_s")
    )
    max_body_bytes: int = Field(
        10 * 1024 * 1024, gt=0, validation_alias=AliasChoices("CRAWL_MAX_BODY_BYTES", "max_body_bytes")
    )
    max_redirects: int = Field(5, ge=0, validation_alias=AliasChoices("CRAWL_MAX_REDIRECTS", "max_redirects"))
    fetch_deadline_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("CRAWL_FETCH_DEADLINE", "fetch_deadline_s"),
        description="Total seconds for one response (connect, headers and body); a trickling server is cut off.",
    )
    content_types: list[str] = Field(
        default_factory=lambda: ["text/html", "application/xhtml+xml"],
        validation_alias=AliasChoices("CRAWL_CONTENT_TYPES", "content_types"),
        description="JSON list of media types whose body is downloaded and parsed; other responses land "
        "with their status and type but no body.",
    )
    fetch_max_attempts: int = Field(
        3, ge=1, validation_alias=AliasChoices("CRAWL_FETCH_MAX_ATTEMPTS", "fetch_max_attempts"),
        description="Tries per URL (the first included) for connection errors, 429 and 5xx.",
    )
    retry_backoff_s: float = Field(
        0.5, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_BACKOFF", "retry_backoff_s"),
        description="First retry backoff; doubles each try, with jitter, capped at 10 s.",
    )
    retry_max_wait_s: float = Field(
        30.0, ge=0, validation_alias=AliasChoices("CRAWL_RETRY_MAX_WAIT", "retry_max_wait_s"),
        description="Most seconds one URL waits in retries; a longer Retry-After fails it at once.",
    )
    max_crawl_delay_s: float = Field(
        10.0, ge=0, validation_alias=AliasChoices("CRAWL_MAX_CRAWL_DELAY", "max_crawl_delay_s"),
        description="Cap on a robots.txt Crawl-delay.",
    )
    max_host_delay_ms: int = Field(
        30_000, ge=0, validation_alias=AliasChoices("CRAWL_MAX_HOST_DELAY_MS", "max_host_delay_ms"),
        description="Cap on the adaptive per-host delay (raised by 429/503 and slow answers).",
    )
    slow_response_ms: int = Field(
        2_000, gt=0, validation_alias=AliasChoices("CRAWL_SLOW_RESPONSE_MS", "slow_response_ms"),
        description="After a slower response its host waits as long again before the next request.",
    )
    proxies: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("CRAWL_PROXIES", "proxies"),
        description="JSON list of proxy URLs used in rotation; write a password as ${ENV_VAR} so it stays "
        "in the environment. A failing proxy sits out 60 s.",
    )
    obey_robots: bool = Field(True, validation_alias=AliasChoices("CRAWL_OBEY_ROBOTS", "obey_robots"))
    allowed_networks: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("CRAWL_ALLOWED_NETWORKS", "allowed_networks"),
        description='JSON list of CIDRs the fetcher may connect to although they are private, loopback '
        'or link-local, e.g. ["127.0.0.0/8"]. Empty: only public addresses (the SSRF guard).',
    )
    parser: Literal["lxml", "bs4"] = Field(
        "lxml", validation_alias=AliasChoices("CRAWL_PARSER", "parser"),
        description="Link/text extractor: lxml (fast) or BeautifulSoup.",
    )
    main_content: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_MAIN_CONTENT", "main_content"),
        description="Extract each page's main text, language and SimHash in the parse step (Resiliparse; "
        "false: documents.main_text and simhash stay NULL, and near_duplicates finds exact copies only).",
    )
    parse_workers: int = Field(
        2, ge=0, le=16, validation_alias=AliasChoices("CRAWL_PARSE_WORKERS", "parse_workers"),
        description="Processes a fetch step forks to parse its pages while its threads go on fetching "
        "(fetching and parsing then use two cores). 0: parse in the step's own process after the fetch.",
    )

    # --- Crawl defaults (a crawl request may override) -------------------------------------------
    default_max_pages: int = Field(
        10_000, ge=1, validation_alias=AliasChoices("CRAWL_DEFAULT_MAX_PAGES", "default_max_pages")
    )
    default_max_depth: int = Field(
        10, ge=0, validation_alias=AliasChoices("CRAWL_DEFAULT_MAX_DEPTH", "default_max_depth")
    )
    default_scope: Scope = Field("host", validation_alias=AliasChoices("CRAWL_DEFAULT_SCOPE", "default_scope"))

    # --- Alerting, monitoring and partition retention -------------------------------------------
    alert_webhook_url: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_WEBHOOK_URL", "alert_webhook_url"),
        description='Webhook alerts are POSTed to as Slack-compatible JSON {"text": ...}; empty: none.',
    )
    alert_smtp_host: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_SMTP_HOST", "alert_smtp_host"),
        description="SMTP server alerts are mailed through; empty: no e-mail.",
    )
    alert_smtp_port: int = Field(
        25, ge=1, le=65535, validation_alias=AliasChoices("CRAWL_ALERT_SMTP_PORT", "alert_smtp_port")
    )
    alert_smtp_starttls: bool = Field(
        False, validation_alias=AliasChoices("CRAWL_ALERT_SMTP_STARTTLS", "alert_smtp_starttls"),
        description="Upgrade the SMTP connection with STARTTLS before logging in and sending.",
    )
    alert_smtp_user: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_SMTP_USER", "alert_smtp_user"),
        description="SMTP login; empty: send without logging in.",
    )
    alert_smtp_password: SecretStr = Field(
        SecretStr(""), validation_alias=AliasChoices("CRAWL_ALERT_SMTP_PASSWORD", "alert_smtp_password"),
        description="SMTP password (a secret: never logged or shown).",
    )
    alert_email_from: str = Field(
        "crawl-platform@localhost", validation_alias=AliasChoices("CRAWL_ALERT_EMAIL_FROM", "alert_email_from")
    )
    alert_email_to: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("CRAWL_ALERT_EMAIL_TO", "alert_email_to"),
        description='JSON list of addresses alerts are mailed to, e.g. ["ops@example.com"]; empty: no e-mail.',
    )
    stall_minutes: float = Field(
        15.0, gt=0, validation_alias=AliasChoices("CRAWL_STALL_MINUTES", "stall_minutes"),
        description="A crawl with pending URLs and no URL finished for this long is stalled (one alert per stall).",
    )
    ui_url: str = Field(
        "http://127.0.0.1:3000", validation_alias=AliasChoices("CRAWL_UI_URL", "ui_url"),
        description="Base URL of the Dagster UI, for the links in alerts.",
    )
    monitor_interval_s: int = Field(
        60, ge=15, validation_alias=AliasChoices("CRAWL_MONITOR_INTERVAL", "monitor_interval_s"),
        description="Seconds between two crawl_progress observations (pending, fetched, failed, pages/s, lag).",
    )
    batch_retention_days: float = Field(
        7.0, ge=0, validation_alias=AliasChoices("CRAWL_BATCH_RETENTION_DAYS", "batch_retention_days"),
        description="Batch partitions without a run for this long are removed from Dagster (their rows "
        "stay in the lake); 7 matches Kafka's default retention. 0 keeps them all.",
    )
    # --- Adaptive revisits (README: "Recurring crawls") -------------------------------------------
    revisit_min_interval: float = Field(
        60.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_MIN_INTERVAL", "revisit_min_interval"),
        description="Shortest revisit interval of a URL, in seconds (Nutch's min_interval).",
    )
    revisit_max_interval: float = Field(
        30 * 86400.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_MAX_INTERVAL", "revisit_max_interval"),
        description="Longest revisit interval of a URL, in seconds.",
    )
    revisit_inc_rate: float = Field(
        0.4, ge=0, validation_alias=AliasChoices("CRAWL_REVISIT_INC_RATE", "revisit_inc_rate"),
        description="Unchanged content: interval *= 1 + this.",
    )
    revisit_dec_rate: float = Field(
        0.2, ge=0, le=1, validation_alias=AliasChoices("CRAWL_REVISIT_DEC_RATE", "revisit_dec_rate"),
        description="Changed content: interval = (1 - this) * interval + this * minimum.",
    )
    revisit_default_interval: float = Field(
        86400.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_DEFAULT_INTERVAL", "revisit_default_interval"),
        description="First interval of a URL whose crawl has no schedule, in seconds.",
    )

    def to_env(self) -> dict[str, str]:
        """Every setting as the environment variable that sets it (hands settings to child processes)."""
        env = {}
        for name, info in type(self).model_fields.items():
            alias = info.validation_alias
            var = alias.choices[0] if isinstance(alias, AliasChoices) else name.upper()
            value = getattr(self, name)
            if isinstance(value, SecretStr):  # a child process needs the secret itself
                value = value.get_secret_value()
            env[str(var)] = json.dumps(value) if isinstance(value, dict | list) else str(value)
        return env

    def secrets(self) -> dict[str, str]:
        """The environment, for ``${VAR}`` references in settings such as proxy passwords."""
        return dict(os.environ)

    def partition_batch_size(self, hosts_per_partition: float = 1.0) -> int:
        """Messages per partition per run: ``CRAWL_BATCH_SIZE``, or (auto) what the partition's
        hosts serve in ``CRAWL_BATCH_SECONDS`` at the politeness delay: one host's share (at least
        10 ms a request) times the hosts a partition holds (``hosts_per_partition``, at least one;
        a host's requests follow one another, different hosts' run side by side), kept between
        100 (few runs are worth their start) and 5,000 (memory of one run)."""
        if self.batch_size:
            return self.batch_size
        per_request_s = max(self.host_delay_ms, 10) / 1000.0
        return max(100, min(5_000, int(self.batch_seconds / per_request_s * max(1.0, hosts_per_partition))))

    def lake_backups_root(self) -> Path:
        """The folder backups go into: ``CRAWL_LAKE_BACKUP_PATH``, or ``backups/`` beside the lake folder."""
        return Path(self.lake_backup_path) if self.lake_backup_path else self.lake_path.parent / "backups"

    def continue_seconds(self) -> float:
        """How long a sensor-started batch run goes on to its partitions' next link levels
        (``CRAWL_RUN_CONTINUE_S``; 0 on Celery), always well inside the run timeout."""
        if self.executor == "celery":
            return 0.0
        return min(self.run_continue_s, self.run_timeout_s / 2)

    def shard_count(self) -> int:
        """Fetch shards per batch run (``CRAWL_FETCH_SHARDS``, or its default for the executor)."""
        if self.fetch_shards:
            return self.fetch_shards
        return 4 if self.executor == "celery" else 1

    def kafka_config(self) -> dict[str, str]:
        """librdkafka base configuration shared by producers, consumers and admin clients."""
        return {"bootstrap.servers": self.kafka_bootstrap_servers, **self.kafka_client_config}
