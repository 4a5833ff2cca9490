"""Each run of a Dagster instance on one time line: when it was created, started and ended, and
when each of its steps started and how long it took, with a batch's fetch/parse/archive/land
seconds from its ``pages`` materialisation. For a crawl kept by ``compare.py --keep``:

    .venv/bin/python benchmarks/run_timeline.py /tmp/crawl-compare-XXXX/platform-dagster/dagster_home

Times are seconds after the first run was created; the last line sums each step's time over runs.
"""

import collections
import sys

from dagster import DagsterEventType, DagsterInstance

ENDS = (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE)
RUN_ENDS = (DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE)


def main(home: str) -> None:
    with DagsterInstance.from_config(home) as instance:
        records = sorted(instance.get_run_records(), key=lambda r: r.create_timestamp.timestamp())
        if not records:
            sys.exit(f"no runs in {home}")
        t0 = records[0].create_timestamp.timestamp()
        totals: collections.Counter[str] = collections.Counter()
        for record in records:
            run = record.dagster_run
            started: dict[str, float] = {}
            steps, figures, start, end = [], {}, float("nan"), float("nan")
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None:
                    continue
                key = event.step_key or ""
                if event.event_type == DagsterEventType.STEP_START:
                    started[key] = entry.timestamp
                elif event.event_type in ENDS and key in started:
                    took = entry.timestamp - started[key]
                    steps.append(f"{key.split('.')[-1]}@{started[key] - t0:.1f}+{took:.2f}")
                    totals[key.split("[")[0]] += took
                elif event.event_type == DagsterEventType.RUN_START:
                    start = entry.timestamp - t0
                elif event.event_type in RUN_ENDS:
                    end = entry.timestamp - t0
                elif event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
                    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
                    if materialization.asset_key.path == ["pages"]:
                        figures = {k: v.value for k, v in materialization.metadata.items()
                                   if k.endswith("_seconds") or k == "messages"}
            created = record.create_timestamp.timestamp() - t0
            print(f"{run.job_name[:18]:18} created {created:6.1f} start {start:6.1f} end {end:6.1f} | "
                  + " ".join(steps))
            if figures:
                print(f"{'':24}{figures}")
        print("summed over runs:", ", ".join(f"{k} {v:.1f} s" for k, v in totals.most_common()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: run_timeline.py DAGSTER_HOME")
    main(sys.argv[1])
