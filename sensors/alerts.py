"""Alert sensors: a failed run, a failed or erroring quality check, a stalled crawl.

Each turns what Dagster or the lake saw into an engine :class:`~crawl_platform.alerting.alerts.Alert`
and hands it to the :class:`~crawl_platform.alerting.senders.Notifier` (webhook and/or e-mail,
``CRAWL_ALERT_*``). Deduplication lives in the cursors:
- ``run_failure_alert_sensor`` (Dagster's ``@run_failure_sensor``) sees each failed run once; a
  failed quality run is reported as its checks erroring. An alert no channel took is parked in
  an outbox in the instance's key-value store, which ``stall_alert_sensor`` sends again every
  minute until a channel takes it;
- ``quality_alert_sensor`` keeps the id of the last check execution it saw and sends one alert
  per run whose checks failed; its first tick only sets the cursor (no alerts for old history);
- ``stall_alert_sensor`` keeps the stalls it alerted (a :class:`StallLedger`): one stall is one
  alert; an alert no channel took is tried again at the next tick.
"""

import re
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetKey,
    DagsterInstance,
    DefaultSensorStatus,
    RunFailureSensorContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_failure_sensor,
    sensor,
)
from dagster_shared.error import SerializableErrorInfo

from crawl_platform.alerting.affected import crawls_of_batches
from crawl_platform.alerting.alerts import Alert, UILinks, check_errored, check_failed, crawl_stalled, run_failed
from crawl_platform.alerting.senders import AlertOutbox, Notifier
from crawl_platform.alerting.stalls import StallLedger, find_stalls
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.config import Settings
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.frontier.state_store import utc_now
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.assets.jobs import crawl_quality_job
from crawl_platform_dagster.dagster_internals import AssetCheckExecutionRecordStatus
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource

QUALITY_CHECKS = [AssetCheckKey(AssetKey("pages"), "pages_quality"),
                  AssetCheckKey(AssetKey("documents"), "documents_quality")]
CHECK_HISTORY = 200  # executions per check read each tick (a quality run every 30 s makes two)
OUTBOX_KEY = "crawl_platform/alert_outbox"
_OUTBOX_LOCK = threading.Lock()  # the sensors of one code location evaluate in threads of one process


def deliver(context_log: Any, settings: Settings, alert: Alert) -> bool:
    """Send ``alert`` on every configured channel; True when one took it or none is configured
    (then the alert is only logged)."""
    notifier = Notifier.from_settings(settings)
    if not notifier.configured:
        context_log.info(f"no alert channel configured (CRAWL_ALERT_*); alert:\n{alert.text}")
        return True
    delivery = notifier.send(alert)
    for error in delivery.errors:
        context_log.warning(f"alert not delivered: {error}")
    return delivery.ok


def park(instance: DagsterInstance, alert: Alert) -> None:
    """Keep an undelivered alert in the instance's outbox (sent again by :func:`flush_outbox`)."""
    with _OUTBOX_LOCK:
        storage = instance.daemon_cursor_storage
        outbox = AlertOutbox.decode(storage.get_cursor_values({OUTBOX_KEY}).get(OUTBOX_KEY))
        outbox.park(alert)
        storage.set_cursor_values({OUTBOX_KEY: outbox.encode()})


def flush_outbox(instance: DagsterInstance, settings: Settings, context_log: Any) -> int:
    """Send the parked alerts again; returns how many are still waiting."""
    with _OUTBOX_LOCK:
        storage = instance.daemon_cursor_storage
        raw = storage.get_cursor_values({OUTBOX_KEY}).get(OUTBOX_KEY)
        outbox = AlertOutbox.decode(raw)
        if not outbox.alerts:
            return 0
        sent, errors = outbox.flush(Notifier.from_settings(settings))
        for error in errors:
            context_log.warning(f"parked alert still not delivered: {error}")
        if sent:
            context_log.info(f"sent {sent} parked alert(s)")
            storage.set_cursor_values({OUTBOX_KEY: outbox.encode()})
        return len(outbox.alerts)


def _root_error(error: SerializableErrorInfo | None) -> str:
    """The innermost cause's first line (the user's exception, not Dagster's wrapper), its class
    without the module path: ``StoreBusyError: ...``."""
    while error is not None and error.cause is not None:
        error = error.cause
    if error is None or not error.message.strip():
        return ""
    return re.sub(r"^[\w.]+\.(\w+):", r"\1:", error.message.strip().splitlines()[0])


def _failure_text(context: RunFailureSensorContext) -> str:
    """What broke: each failed step's error (steps failing alike in one line), else the run's
    failure message (run monitoring's reason when a worker died)."""
    by_error: dict[str, list[str]] = {}
    for event in context.get_step_failure_events():
        error = _root_error(event.step_failure_data.error) or "failed"
        by_error.setdefault(error, []).append(str(event.step_key))
    if by_error:
        return "; ".join(f"step{'s' if len(steps) > 1 else ''} {', '.join(sorted(steps))}: {error}"
                         for error, steps in by_error.items())
    return context.failure_event.message or "the run failed"


def _quality_batches(run_config: dict[str, object]) -> list[str]:
    ops = run_config.get("ops") or {}
    for op_config in (ops.values() if isinstance(ops, dict) else []):
        batches = ((op_config or {}).get("config") or {}).get("batches")
        if batches:
            return sorted(str(b) for b in batches)
    return []


def _submitted_crawl(run_config: dict[str, object]) -> list[str]:
    ops = run_config.get("ops") or {}
    for op_config in (ops.values() if isinstance(ops, dict) else []):
        crawl_id = ((op_config or {}).get("config") or {}).get("crawl_id")
        if crawl_id:
            return [str(crawl_id)]
    return []


def _crawls_of(settings: Settings, batches: list[str]) -> list[str]:
    """The crawls of ``batches``: from the lake, else from their messages on the frontier topic."""
    if not batches:
        return []
    bus = KafkaBus.from_settings(settings)
    try:
        return crawls_of_batches(CrawlStore.from_settings(settings), batches, bus)
    finally:
        bus.close()


def failed_run_alert(context: RunFailureSensorContext, settings: Settings) -> Alert:
    """The alert of one failed run: a quality run's checks errored, or a run failed (a batch run
    names its batch and the crawls of its URLs)."""
    run = context.dagster_run
    links = UILinks(settings.ui_url)
    error = _failure_text(context)
    if run.job_name == crawl_quality_job.name:
        batches = _quality_batches(dict(run.run_config))
        checks = sorted(run.asset_check_selection or QUALITY_CHECKS, key=lambda k: k.name)
        return check_errored(links, run_id=run.run_id, checks=[(k.asset_key.to_user_string(), k.name) for k in checks],
                             error=error, crawls=_crawls_of(settings, batches), batches=batches)
    partition = run.tags.get("dagster/partition")
    crawls = _submitted_crawl(dict(run.run_config)) or _crawls_of(settings, [partition] if partition else [])
    retry = None
    if context.instance.run_retries_enabled:
        attempt = int(run.tags.get("dagster/retry_number", "0")) + 1
        retry = f"attempt {attempt} of {context.instance.run_retries_max_retries + 1}"
    return run_failed(links, job=run.job_name, run_id=run.run_id, error=error, crawls=crawls,
                      partition=partition, retry=retry)


@run_failure_sensor(
    name="run_failure_alert_sensor",
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
    description="Alerts (webhook/e-mail, CRAWL_ALERT_*) on every failed run: job, crawl, error, link.",
)
def run_failure_alert_sensor(context: RunFailureSensorContext, crawl: CrawlSettingsResource) -> None:
    settings = crawl.settings()
    alert = failed_run_alert(context, settings)
    if not deliver(context.log, settings, alert):
        park(context.instance, alert)
        context.log.warning(f"alert for run {context.dagster_run.run_id} parked: it is sent again every minute")


def _check_failures(records: Sequence[Any]) -> list[tuple[str, str, str]]:
    failures = []
    for record in records:
        evaluation = record.event.dagster_event.event_specific_data if record.event else None
        metadata = getattr(evaluation, "metadata", {}) or {}
        what = metadata.get("failures")
        text = (what.value if what is not None else "") or getattr(evaluation, "description", "") or "failed"
        key = record.key
        failures.append((key.asset_key.to_user_string(), key.name, "; ".join(str(text).splitlines())))
    return failures


def _checked_batches(records: Sequence[Any]) -> list[str]:
    batches: set[str] = set()
    for record in records:
        evaluation = record.event.dagster_event.event_specific_data if record.event else None
        value = (getattr(evaluation, "metadata", {}) or {}).get("batch_id")
        if value is not None and value.value != "(whole table)":
            batches.update(b.strip() for b in str(value.value).split(",") if b.strip())
    return sorted(batches)


@sensor(
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Alerts once per quality run whose Great Expectations checks failed.",
)
def quality_alert_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    storage = context.instance.event_log_storage
    records = [r for key in QUALITY_CHECKS for r in storage.get_asset_check_execution_history(
        key, limit=CHECK_HISTORY, status={AssetCheckExecutionRecordStatus.FAILED})]
    after = int(context.cursor) if context.cursor and context.cursor.isdigit() else None
    if after is None:  # first tick: start from here, no alerts for old history
        latest = max((r.id for r in records), default=0)
        return SensorResult(skip_reason="watching quality checks from now on", cursor=str(latest))
    new = sorted((r for r in records if r.id > after), key=lambda r: r.id)
    if not new:
        return SkipReason("no quality check failed since the last tick")
    settings = crawl.settings()
    store = CrawlStore.from_settings(settings)
    cursor = after
    for run_id in dict.fromkeys(r.run_id for r in new):
        of_run = [r for r in new if r.run_id == run_id]
        batches = _checked_batches(of_run)
        alert = check_failed(UILinks(settings.ui_url), run_id=run_id, failures=_check_failures(of_run),
                             crawls=crawls_of_batches(store, batches), batches=batches)
        if not deliver(context.log, settings, alert):
            break  # this run and later ones are tried again next tick
        cursor = max(r.id for r in of_run)
    return SensorResult(skip_reason=f"{len(new)} failed check execution(s) seen", cursor=str(cursor))


@sensor(
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
    description="Alerts once per stall: a crawl with pending URLs and none finished for CRAWL_STALL_MINUTES; "
    "sends parked alerts again.",
)
def stall_alert_sensor(context: SensorEvaluationContext, crawl: CrawlSettingsResource) -> SensorResult | SkipReason:
    settings = crawl.settings()
    waiting = flush_outbox(context.instance, settings, context.log)
    store = CrawlStore.from_settings(settings)
    if not store.exists():
        return SkipReason("no lake yet")
    now = utc_now()
    stalls = find_stalls(FrontierReadModel(store).status(), now, timedelta(minutes=settings.stall_minutes))
    ledger = StallLedger.decode(context.cursor)
    sent = []
    for stall in ledger.new(stalls):
        alert = crawl_stalled(UILinks(settings.ui_url), crawl_id=stall.crawl_id, pending=stall.pending,
                              idle_minutes=stall.idle_minutes(now), last_progress=stall.last_progress)
        if deliver(context.log, settings, alert):
            sent.append(stall)
    ledger.settle(stalls, sent)
    return SensorResult(skip_reason=f"{len(stalls)} stalled crawl(s), {len(sent)} alerted now, "
                                    f"{waiting} parked alert(s) waiting", cursor=ledger.encode())
