"""Dagster's queued run coordinator, dequeuing more often than once a second.

A one-host crawl is one frontier partition, and the partition's limit of one run at a time makes
its batch runs follow one another: each waits in the queue until the daemon's next pass after
the previous run ended. ``QueuedRunCoordinator`` takes ``dequeue_interval_seconds`` in whole
seconds, so at its least (1 s) a batch waits up to a second there (the daemon's loop sleeps
in steps of 0.5 s). :class:`QuickQueuedRunCoordinator`
is the same coordinator with a fractional interval; ``dagster.yaml`` written by
:func:`crawl_platform_dagster.instance.write_instance_yaml` sets 0.5. Each pass reads the queued
and in-progress runs from the instance, a few milliseconds on an idle stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import Field, QueuedRunCoordinator

DEFAULT_DEQUEUE_INTERVAL_S = 0.5


class QuickQueuedRunCoordinator(QueuedRunCoordinator):
    """``QueuedRunCoordinator`` whose ``dequeue_interval_seconds`` may be a fraction of a second."""

    def __init__(self, dequeue_interval_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dequeue_interval_seconds = (DEFAULT_DEQUEUE_INTERVAL_S if dequeue_interval_seconds is None
                                          else float(dequeue_interval_seconds))  # type: ignore[assignment]

    @property
    def dequeue_interval_seconds(self) -> float:  # type: ignore[override]
        return self._dequeue_interval_seconds

    @classmethod
    def config_type(cls) -> Mapping[str, Any]:
        fields = dict(super().config_type())  # type: ignore[arg-type]
        fields["dequeue_interval_seconds"] = Field(
            float, is_required=False,
            description=f"Seconds between the daemon's passes over the run queue ({DEFAULT_DEQUEUE_INTERVAL_S}); "
                        "a fraction of a second is allowed.")
        return fields
