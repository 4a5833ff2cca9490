"""Where the platform's wall time went, read back from the Dagster event log after a crawl.

Every run's events carry timestamps: enqueued, starting (dequeued and launched), start (the run
worker process is up and has loaded the definitions), each step's start and success, and the end.
Each instant of the crawl's wall-clock window is given to the most productive thing happening then:

    batch step (read, fetch, parse, land)  >  frontier step  >  intake step  >  quality checks
    >  run process start-up / teardown  >  run queued  >  nothing running (waiting for a sensor tick)

so the categories add up to the wall time. The batches' own metadata (`fetch_seconds`,
`parse_seconds`, `land_seconds`, `messages`) splits the batch step further. Nothing here changes the
instance; it only reads it.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Highest priority first.
CATEGORIES = ("batch step", "frontier step", "intake step", "quality checks", "run start-up/teardown",
              "run queued", "no run active")
_STEP_CATEGORY = {"crawl_batch": "batch step", "frontier": "frontier step", "crawls": "intake step"}


def _category(step_key: str) -> str:
    """The batch graph's steps (crawl_batch.plan_batch, crawl_batch.fetch_shard[s0], crawl_batch.land_batch)
    are all the batch step; a check step is the quality checks."""
    return _STEP_CATEGORY.get(step_key.split(".", 1)[0], "quality checks")


@dataclass
class RunProfile:
    runs: int = 0
    batch_runs: int = 0
    wall_split_s: dict[str, float] = field(default_factory=dict)
    summed_s: dict[str, float] = field(default_factory=dict)  # the split within each run, summed over runs
    batch_metadata_s: dict[str, float] = field(default_factory=dict)  # fetch/parse/land from the batches
    messages: int = 0
    largest_batch: int = 0
    failed_runs: int = 0
    failures: list[str] = field(default_factory=list)  # first line of each step/run failure


def profile_dagster_home(dagster_home: Path, window: tuple[float, float]) -> RunProfile:
    """Split `window` (epoch seconds: seed submitted, crawl done) over what the runs were doing."""
    from dagster import DagsterInstance  # noqa: PLC0415 -- heavy, and only needed after the crawl

    intervals: list[tuple[float, float, str]] = []
    profile = RunProfile()
    meta: dict[str, float] = defaultdict(float)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        for run in instance.get_runs(limit=100_000):
            profile.runs += 1
            events = instance.all_logs(run.run_id)
            marks: dict[str, float] = {}
            steps: dict[str, list[float]] = defaultdict(list)
            for event in events:
                de = event.dagster_event
                if de is None:
                    continue
                kind = de.event_type_value
                if kind in ("PIPELINE_ENQUEUED", "PIPELINE_STARTING", "PIPELINE_START", "PIPELINE_SUCCESS",
                            "PIPELINE_FAILURE", "PIPELINE_CANCELED"):
                    marks.setdefault(kind, event.timestamp)
                elif kind in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE") and de.step_key:
                    steps[de.step_key].append(event.timestamp)
                elif kind == "ASSET_MATERIALIZATION":
                    _batch_metadata(de, meta, profile)
                if kind in ("STEP_FAILURE", "PIPELINE_FAILURE"):
                    error = getattr(de.event_specific_data, "error", None)
                    message = (error.message if error is not None else event.user_message) or ""
                    first_line = next(iter(message.strip().splitlines()), "(no message)")
                    profile.failures.append(f"{de.step_key or 'run'}: {first_line[:200]}")
            if "PIPELINE_FAILURE" in marks:
                profile.failed_runs += 1
            profile.batch_runs += run.job_name.startswith("crawl_batch")
            own = _run_intervals(marks, steps)
            if own:  # the same split inside the run alone: what each run spent, overlaps counted per run
                lo, hi = min(s for s, _, _ in own), max(e for _, e, _ in own)
                for label, seconds in _split(own, lo, hi).items():
                    profile.summed_s[label] = profile.summed_s.get(label, 0.0) + seconds
            intervals += own
    profile.batch_metadata_s = dict(meta)
    profile.wall_split_s = _split(intervals, *window)
    return profile


def _batch_metadata(de: Any, meta: dict[str, float], profile: RunProfile) -> None:
    materialization = de.event_specific_data.materialization
    if materialization.asset_key.path != ["pages"]:
        return
    values = {k: v.value for k, v in materialization.metadata.items()}
    for key in ("fetch_seconds", "parse_seconds", "land_seconds"):
        meta[key.removesuffix("_seconds")] += float(values.get(key) or 0.0)
    messages = int(values.get("messages") or 0)
    profile.messages += messages
    profile.largest_batch = max(profile.largest_batch, messages)


def _run_intervals(marks: dict[str, float], steps: dict[str, list[float]]) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    enqueued, starting, start = marks.get("PIPELINE_ENQUEUED"), marks.get("PIPELINE_STARTING"), marks.get(
        "PIPELINE_START")
    end = marks.get("PIPELINE_SUCCESS") or marks.get("PIPELINE_FAILURE") or marks.get("PIPELINE_CANCELED")
    if enqueued is not None and starting is not None:
        out.append((enqueued, starting, "run queued"))
    if starting is not None and end is not None:
        out.append((starting, end, "run start-up/teardown"))  # the steps below take precedence
    for key, times in steps.items():
        if len(times) >= 2:
            out.append((min(times), max(times), _category(key)))
    del start  # the process-up mark is inside start-up/teardown; kept in the events for the UI
    return out


def _split(intervals: list[tuple[float, float, str]], t0: float, t1: float) -> dict[str, float]:
    """Each instant of [t0, t1] goes to the highest-priority label active then."""
    rank = {label: i for i, label in enumerate(CATEGORIES)}
    cuts = sorted({t0, t1, *(t for s, e, _ in intervals for t in (s, e) if t0 < t < t1)})
    split = dict.fromkeys(CATEGORIES, 0.0)
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        active = [rank[label] for s, e, label in intervals if s <= mid < e]
        split[CATEGORIES[min(active)] if active else "no run active"] += b - a
    return split


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: dagster_profile.py DAGSTER_HOME   (window: first to last run event)")
    from dagster import DagsterInstance

    with DagsterInstance.from_config(sys.argv[1]) as inst:
        stamps = [e.timestamp for r in inst.get_runs(limit=100_000) for e in inst.all_logs(r.run_id)]
    result = profile_dagster_home(Path(sys.argv[1]), (min(stamps), max(stamps)))
    print(result)
