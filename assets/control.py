"""Crawl control in Dagster: the Launchpad jobs that cancel, pause or resume a crawl, and the job
that applies the control topic's commands.

``cancel_crawl_job``, ``pause_crawl_job`` and ``resume_crawl_job`` (config: ``crawl_id``) put a
command on the Kafka control topic, as ``crawl-platform cancel|pause|resume`` does; the
``control_sensor`` (``sensors/kafka.py``) turns its new offsets into a ``crawl_control_job`` run,
which applies them to the lake with the engine's
:class:`~crawl_platform.pipeline.control.ControlIntake` (idempotent, stale commands ignored).
"""

from dagster import Config, Failure, JobDefinition, OpExecutionContext, in_process_executor, job, op
from pydantic import Field

from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.pipeline.control import ControlIntake, build_control, submit_control
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource


class ControlRangesConfig(Config):
    control_ranges: list[str] = Field(default_factory=list, description="Control-topic offset ranges, e.g. p0-3-5.")


@op(pool=DUCKDB_WRITER_POOL)
def apply_crawl_controls(context: OpExecutionContext, config: ControlRangesConfig,
                         crawl: CrawlSettingsResource) -> None:
    settings = crawl.settings()
    intake = ControlIntake.from_settings(settings)
    for key in config.control_ranges:
        report = intake.apply(OffsetRange.parse(key))
        for outcome in report.outcomes:
            context.log.info(outcome.describe())
        if report.dead_letters:
            context.log.warning(f"{report.dead_letters} control commands went to the dead-letter topic")


@job(executor_def=in_process_executor,
     description="Apply the control topic's commands (cancel, pause, resume) to the crawls in the lake.")
def crawl_control_job() -> None:
    apply_crawl_controls()


class CrawlIdConfig(Config):
    crawl_id: str = Field(description="The crawl to control (see `crawl-platform status`).")


def _control_job(action: str, description: str) -> JobDefinition:
    @op(name=f"submit_{action}")
    def submit(context: OpExecutionContext, config: CrawlIdConfig, crawl: CrawlSettingsResource) -> None:
        try:
            command = build_control(config.crawl_id, action)
        except ValueError as err:
            raise Failure(f"bad control command: {err}") from None
        submit_control(crawl.bus(), command)
        context.log.info(f"submitted {action} of crawl {command.crawl_id} to the control topic")

    @job(name=f"{action}_crawl_job", description=description)
    def control() -> None:
        submit()

    return control


cancel_crawl_job = _control_job("cancel", "Cancel a crawl: its unfetched URLs are dropped, no new one admitted.")
pause_crawl_job = _control_job("pause", "Pause a crawl: its URLs are kept and none is fetched until resumed.")
resume_crawl_job = _control_job("resume", "Resume a paused crawl: its URLs are published again.")
