"""Per-crawl progress and the frontier's Kafka backlog, as figures the UI plots over time.

Each monitor tick turns the read model's :class:`~crawl_platform.frontier.read_model.CrawlStatus`
rows and the frontier topic's end offsets into one flat mapping of numbers (the metadata of one
``crawl_progress`` observation; the Dagster UI plots every numeric key over time in the asset's
Plots tab):
- totals over all crawls: ``pending``, ``fetched``, ``failed``, ``pages_per_second`` (URLs
  finished per second since the previous tick) and ``frontier_lag`` (frontier messages not yet
  handed to a batch run: each partition's end offset minus the frontier sensor's cursor),
  plus ``frontier_lag_p<N>`` per partition;
- per crawl, for crawls with pending URLs or progress since the previous tick (a finished crawl
  gets its last point, then drops out): ``<crawl_id>/pending``, ``/fetched``, ``/failed`` and
  ``/pages_per_second``.
:class:`ProgressState` (the previous tick's finished counts and time) is what a rate needs; the
sensor keeps it in its cursor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC

from crawl_platform.frontier.read_model import CrawlStatus


@dataclass
class ProgressState:
    """The previous tick: its time (epoch seconds) and each active crawl's finished URLs."""

    at: float | None = None
    done: dict[str, int] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: str | None) -> ProgressState:
        try:
            body = json.loads(raw or "{}")
            return cls(float(body["at"]) if body.get("at") is not None else None,
                       {str(k): int(v) for k, v in body.get("done", {}).items()})
        except (ValueError, TypeError, AttributeError):
            return cls()

    def encode(self) -> str:
        return json.dumps({"at": self.at, "done": dict(sorted(self.done.items()))})


def frontier_lag(watermarks: dict[int, tuple[int, int]], cursor: dict[int, int]) -> dict[int, int]:
    """Messages per partition past the cursor (from the low watermark where the cursor has none,
    or is behind what the log still holds)."""
    return {part: max(0, high - max(cursor.get(part, low), low)) for part, (low, high) in sorted(watermarks.items())}


def _done(status: CrawlStatus) -> int:
    return status.fetched + status.failed + status.disallowed


def progress_figures(statuses: Iterable[CrawlStatus], lag: dict[int, int] | None, previous: ProgressState,
                     now: float) -> tuple[dict[str, float | int], ProgressState]:
    """The observation's figures and the state for the next tick. ``lag`` None: the broker was
    unreachable, so no lag figures (a gap in the plot rather than a false zero)."""
    statuses = list(statuses)
    elapsed = now - previous.at if previous.at is not None else None
    figures: dict[str, float | int] = {
        "crawls_active": 0,
        "pending": sum(s.pending for s in statuses),
        "fetched": sum(s.fetched for s in statuses),
        "failed": sum(s.failed for s in statuses),
    }
    done_total, prior_total = 0, 0
    state = ProgressState(now, {})
    for status in statuses:
        done = _done(status)
        # A crawl the previous tick did not track: new since then (all its progress is new) or
        # idle then (none of it is).
        prior = previous.done.get(status.crawl_id, done if previous.at is not None and
                                  status.registered_at.replace(tzinfo=UTC).timestamp() < previous.at - 1 else 0)
        prior = min(prior, done)
        done_total, prior_total = done_total + done, prior_total + prior
        if status.pending == 0 and done == prior:
            continue
        figures["crawls_active"] = int(figures["crawls_active"]) + 1
        if status.pending:
            state.done[status.crawl_id] = done
        rate = (done - prior) / elapsed if elapsed else status.pages_per_second
        figures[f"{status.crawl_id}/pending"] = status.pending
        figures[f"{status.crawl_id}/fetched"] = status.fetched
        figures[f"{status.crawl_id}/failed"] = status.failed
        figures[f"{status.crawl_id}/pages_per_second"] = round(rate, 2)
    figures["pages_per_second"] = round((done_total - prior_total) / elapsed, 2) if elapsed else 0.0
    if lag is not None:
        figures["frontier_lag"] = sum(lag.values())
        figures.update({f"frontier_lag_p{part}": value for part, value in lag.items()})
    return figures, state
