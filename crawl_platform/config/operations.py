"""Settings of operating crawls: a crawl's defaults, alerts, monitoring, partition retention and
adaptive revisits.

Part of :class:`crawl_platform.config.Settings`. ``Scope`` is the one list of crawl scopes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings

Scope = Literal["host", "domain", "any"]  # the one list of crawl scopes; others use get_args(Scope)


class OperationsSettings(BaseSettings):
    """Crawl defaults, alerting and monitoring, partition retention, adaptive revisits."""

    # --- Crawl defaults (a crawl request may override) -------------------------------------------
    default_max_pages: int = Field(
        10_000, ge=1, validation_alias=AliasChoices("CRAWL_DEFAULT_MAX_PAGES", "default_max_pages"),
        description="Default `--max-pages`: most URLs a crawl admits.",
    )
    default_max_depth: int = Field(
        10, ge=0, validation_alias=AliasChoices("CRAWL_DEFAULT_MAX_DEPTH", "default_max_depth"),
        description="Default `--max-depth`: most link hops from a seed.",
    )
    default_scope: Scope = Field(
        "host", validation_alias=AliasChoices("CRAWL_DEFAULT_SCOPE", "default_scope"),
        description="Default `--scope`: which discovered links a crawl follows (docs/crawling.md).",
    )

    # --- Alerting, monitoring and partition retention -------------------------------------------
    alert_webhook_url: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_WEBHOOK_URL", "alert_webhook_url"), repr=False,
        description='Webhook alerts are POSTed to as Slack-compatible JSON `{"text": "..."}` (Slack, '
        "Mattermost, Rocket.Chat incoming webhooks); empty: no webhook. Its path is a secret (Slack's "
        "token): errors show only its scheme and host.",
    )
    alert_smtp_host: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_SMTP_HOST", "alert_smtp_host"),
        description="SMTP server alerts are mailed through. Empty (or no `CRAWL_ALERT_EMAIL_TO`): no e-mail.",
    )
    alert_smtp_port: int = Field(
        25, ge=1, le=65535, validation_alias=AliasChoices("CRAWL_ALERT_SMTP_PORT", "alert_smtp_port"),
        description="The SMTP server's port (587 with `CRAWL_ALERT_SMTP_STARTTLS`).",
    )
    alert_smtp_starttls: bool = Field(
        False, validation_alias=AliasChoices("CRAWL_ALERT_SMTP_STARTTLS", "alert_smtp_starttls"),
        description="Upgrade the SMTP connection with STARTTLS before logging in and sending. The server's "
        "certificate is checked against the system's CAs and its name against `CRAWL_ALERT_SMTP_HOST`; for "
        "a private CA, point `SSL_CERT_FILE` at its PEM file in the Dagster processes' environment.",
    )
    alert_smtp_user: str = Field(
        "", validation_alias=AliasChoices("CRAWL_ALERT_SMTP_USER", "alert_smtp_user"),
        description="SMTP login; empty: send without logging in.",
    )
    alert_smtp_password: SecretStr = Field(
        SecretStr(""), validation_alias=AliasChoices("CRAWL_ALERT_SMTP_PASSWORD", "alert_smtp_password"),
        description="SMTP password. A secret: set it in the environment only; it is never logged or shown.",
    )
    alert_email_from: str = Field(
        "crawl-platform@localhost", validation_alias=AliasChoices("CRAWL_ALERT_EMAIL_FROM", "alert_email_from"),
        description="Sender of alert mails.",
    )
    alert_email_to: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("CRAWL_ALERT_EMAIL_TO", "alert_email_to"),
        description='JSON list of addresses alerts are mailed to, e.g. `["ops@example.com"]`; empty: no e-mail.',
    )
    stall_minutes: float = Field(
        15.0, gt=0, validation_alias=AliasChoices("CRAWL_STALL_MINUTES", "stall_minutes"),
        description="A crawl with pending URLs and no URL finished for this long is stalled (one alert per stall).",
    )
    quality_max_wait_s: float = Field(
        300.0, ge=0, le=86400, validation_alias=AliasChoices("CRAWL_QUALITY_MAX_WAIT_S", "quality_max_wait_s"),
        description="The Great Expectations checks of landed batches wait while batch runs are going (their run "
        "imports a large library, whose memory adds to the batch run's peak) for at most this many seconds after "
        "the oldest unchecked batch landed; once no batch run is going they start at the next tick. 0: check at once.",
    )
    ui_url: str = Field(
        "http://127.0.0.1:3000", validation_alias=AliasChoices("CRAWL_UI_URL", "ui_url"),
        description="Base URL of the Dagster UI, for the links in alerts.",
    )
    monitor_interval_s: int = Field(
        60, ge=15, validation_alias=AliasChoices("CRAWL_MONITOR_INTERVAL", "monitor_interval_s"),
        description="Seconds between two `crawl_progress` observations (pending, fetched, failed, pages/s, "
        "the frontier's Kafka lag); at least 15.",
    )
    batch_retention_days: float = Field(
        7.0, ge=0, validation_alias=AliasChoices("CRAWL_BATCH_RETENTION_DAYS", "batch_retention_days"),
        description="Batch partitions whose last run is older than this are removed from Dagster; their "
        "rows stay in the lake. 7 days is Kafka's default `log.retention.hours` (168): past it a batch's "
        "offsets are gone and it cannot be run again. Set it to your topic's `retention.ms`. `0` keeps "
        "every partition.",
    )

    # --- Adaptive revisits (docs/recurring.md) ---------------------------------------------------
    revisit_min_interval: float = Field(
        60.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_MIN_INTERVAL", "revisit_min_interval"),
        description="Shortest revisit interval of a URL, in seconds (Nutch's `min_interval`; docs/recurring.md).",
    )
    revisit_max_interval: float = Field(
        30 * 86400.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_MAX_INTERVAL", "revisit_max_interval"),
        description="Longest revisit interval of a URL, in seconds (30 days).",
    )
    revisit_inc_rate: float = Field(
        0.4, ge=0, validation_alias=AliasChoices("CRAWL_REVISIT_INC_RATE", "revisit_inc_rate"),
        description="Content unchanged (a 304 or the same hash): `interval *= 1 + rate`.",
    )
    revisit_dec_rate: float = Field(
        0.2, ge=0, le=1, validation_alias=AliasChoices("CRAWL_REVISIT_DEC_RATE", "revisit_dec_rate"),
        description="Content changed: `interval = (1 - rate) * interval + rate * minimum`.",
    )
    revisit_default_interval: float = Field(
        86400.0, gt=0, validation_alias=AliasChoices("CRAWL_REVISIT_DEFAULT_INTERVAL", "revisit_default_interval"),
        description="First revisit interval of a URL whose crawl has no schedule (a scheduled crawl's first "
        "interval is its period), in seconds.",
    )
