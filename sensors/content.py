"""The sensor that keeps ``documents_markdown`` up to date as batches land (declarative automation).

An ``AutomationConditionSensorDefinition`` over the content assets that carry an automation
condition (``documents_markdown``, whose condition is ``assets/markdown.py``'s
``MARKDOWN_AUTOMATION``): every 30 s it evaluates the condition and requests a run when a batch
has landed since the last one. Off by default: trafilatura's CPU per page is high, on a large page
especially (measured by ``benchmarks/markdown_rate.py``), and on a small machine the Markdown runs
compete with the crawl for its cores; turn it on under Automation for Markdown that follows the
crawl, or materialise the asset yourself.
"""

from dagster import AssetSelection, AutomationConditionSensorDefinition, DefaultSensorStatus

content_automation_sensor = AutomationConditionSensorDefinition(
    "content_automation_sensor",
    target=AssetSelection.assets("documents_markdown"),
    default_status=DefaultSensorStatus.STOPPED,
    minimum_interval_seconds=30,
    description="Requests documents_markdown when batches landed pages since its last request.",
)
