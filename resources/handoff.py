"""IO manager that hands a batch run's fetched pages from its fetch steps to its landing step.

Each output is one pickle under ``CRAWL_HANDOFF_DIR/<run_id>/``. The run's files are removed
once the batch is in DuckDB and the landing step's success is recorded (the ``frontier`` step
calls :func:`discard_runs`), so the handoff holds only batches in flight. With Celery workers on
several machines the directory must be shared storage.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from crawl_platform_dagster.resources.settings import platform_settings

HANDOFF_IO_MANAGER_KEY = "crawl_handoff"
STALE_AFTER_S = 24 * 3600  # files of runs that never landed (failed for good) go after a day


class HandoffIOManager(ConfigurableIOManager):
    """Pickles between the steps of a batch run; removed after landing."""

    base_dir: str | None = None

    def root(self) -> Path:
        return Path(self.base_dir) if self.base_dir else platform_settings().handoff_dir

    def _path(self, parts: list[str]) -> Path:
        return self.root().joinpath(*parts).with_suffix(".pickle")

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        path = self._path(list(context.get_identifier()))
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with partial.open("wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        partial.replace(path)  # a step killed mid-write never leaves half a pickle behind

    def load_input(self, context: InputContext) -> Any:
        """The pickled output, or None if it is gone: the batch landed and the handoff was
        removed, but the run was killed before Dagster recorded the step's success, so a retry
        asks for it again (the landing step then checks that the batch is in DuckDB)."""
        upstream = context.upstream_output
        assert upstream is not None  # an input of a step always has an upstream output here
        path = self._path(list(upstream.get_identifier()))
        try:
            with path.open("rb") as fh:
                return pickle.load(fh)  # noqa: S301 - written by this IO manager in this deployment
        except FileNotFoundError:
            context.log.warning(f"handoff {path} is gone (removed once its batch landed)")
            return None


def discard_runs(root: Path, run_ids: list[str]) -> None:
    """Remove the handoff of runs whose batch has landed, and of runs a day old."""
    for run_id in run_ids:
        shutil.rmtree(root / run_id, ignore_errors=True)
    if root.is_dir():
        cutoff = time.time() - STALE_AFTER_S
        for entry in root.iterdir():
            try:
                if entry.is_dir() and entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                continue
