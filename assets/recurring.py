"""The freshness expectation of recurring crawls: the asset check ``recurring_crawls_on_schedule``.

One check on the ``crawls`` asset covers every crawl with a schedule (``--every``/``--cron``): it
fails (severity WARN) when a recurring crawl's last completed pass is older than 1.5 times its
period, and its metadata is a table with one row per recurring crawl: its schedule, latest pass,
last completed pass, next pass and whether it is late. The ``recurring_crawls`` sensor reports it
on every tick, so the UI shows a crawl that fell behind without anyone running the check; it can
also be executed from the UI. Dagster's own ``FreshnessPolicy`` is per asset, and a crawl is not
an asset here (one asset per crawl would be one definition per crawl), hence a check whose rows
are the crawls. The rule is the engine's (:func:`crawl_platform.pipeline.schedules.plan_due_passes`).
"""

from datetime import UTC, datetime

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetKey,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset_check,
)

from crawl_platform.pipeline.schedules import DuePlan, plan_due_passes
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.resources.store import CrawlStoreResource

CHECK_NAME = "recurring_crawls_on_schedule"
_SCHEMA = TableSchema(columns=[TableColumn(name) for name in
                               ("crawl", "schedule", "latest_pass", "last_completed", "next_pass", "state")])


def _stamp(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if when else "-"


def freshness(plan: DuePlan, now: datetime) -> AssetCheckResult:
    """The check's result for a plan made at ``now`` (naive UTC)."""
    late = [f.family for f in plan.families if f.late(now)]
    rows = [TableRecord({"crawl": f.family, "schedule": f.schedule.describe(), "latest_pass": f.latest_pass,
                         "last_completed": _stamp(f.last_completed_at), "next_pass": _stamp(f.next_pass_at),
                         "state": "late" if f.family in late else ("running" if f.running else "on schedule")})
            for f in plan.families]
    description = (f"behind schedule: {', '.join(late)}" if late
                   else f"{len(plan.families)} recurring crawls on schedule")
    return AssetCheckResult(
        passed=not late, severity=AssetCheckSeverity.WARN, description=description,
        metadata={"recurring_crawls": len(plan.families), "late": len(late), "late_crawls": ", ".join(late) or "-",
                  "crawls": MetadataValue.table(rows, _SCHEMA)})


def freshness_evaluation(plan: DuePlan, now: datetime) -> AssetCheckEvaluation:
    """The same result as an evaluation a sensor reports."""
    result = freshness(plan, now)
    return AssetCheckEvaluation(asset_key=AssetKey("crawls"), check_name=CHECK_NAME, passed=result.passed,
                                metadata=result.metadata, severity=result.severity,
                                description=result.description)


@asset_check(asset=crawls, name=CHECK_NAME,
             description="Every recurring crawl completed a pass within 1.5 times its schedule's period.")
def recurring_crawls_on_schedule(context: AssetCheckExecutionContext,
                                 crawl_store: CrawlStoreResource) -> AssetCheckResult:
    now = datetime.now(UTC).replace(tzinfo=None)
    return freshness(plan_due_passes(crawl_store.store(), now), now)
