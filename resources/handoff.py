"""IO manager that hands a batch run's fetched pages from its fetch steps to its landing step.

Each output is one pickle, ``<run_id>/<step>/<output>.pickle``, in the handoff folder
(``CRAWL_HANDOFF_DIR``): a local folder, or object storage (``s3://bucket/prefix/``) when the
steps run on Celery workers on several machines, so no shared file system is needed. A pickle
appears whole or not at all (renamed into place, or uploaded). The run's files are removed once
the batch is in the lake and the landing step's success is recorded (the ``frontier`` step calls
:func:`discard_runs`), so the handoff holds only batches in flight.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from crawl_platform.config import Settings
from crawl_platform.storage import Folder, ObjectStore, open_folder
from crawl_platform_dagster.resources.settings import platform_settings

HANDOFF_IO_MANAGER_KEY = "crawl_handoff"
STALE_AFTER_S = 24 * 3600  # files of runs that never landed (failed for good) go after a day


def handoff_folder(settings: Settings, where: str | None = None) -> Folder:
    """The handoff folder: ``where``, or ``CRAWL_HANDOFF_DIR``; credentials from the settings."""
    return open_folder(where or settings.handoff_dir, ObjectStore.from_settings(settings))


class HandoffIOManager(ConfigurableIOManager):
    """Pickles between the steps of a batch run; removed after landing."""

    base_dir: str | None = None

    def folder(self) -> Folder:
        return handoff_folder(platform_settings(), self.base_dir)

    @staticmethod
    def _name(parts: list[str]) -> str:
        return "/".join(parts) + ".pickle"

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        staged = self.folder().staged(self._name(list(context.get_identifier())))
        try:
            pickle.dump(obj, staged.file, protocol=pickle.HIGHEST_PROTOCOL)
            staged.commit()  # a step killed mid-write never leaves half a pickle behind
        except BaseException:
            staged.discard()
            raise

    def load_input(self, context: InputContext) -> Any:
        """The pickled output, or None if it is gone: the batch landed and the handoff was
        removed, but the run was killed before Dagster recorded the step's success, so a retry
        asks for it again (the landing step then checks that the batch is in the lake)."""
        upstream = context.upstream_output
        assert upstream is not None  # an input of a step always has an upstream output here
        folder = self.folder()
        name = self._name(list(upstream.get_identifier()))
        try:
            with folder.open_read(name) as fh:
                return pickle.load(fh)  # noqa: S301 - written by this IO manager in this deployment
        except FileNotFoundError:
            context.log.warning(f"handoff {folder.url.rstrip('/')}/{name} is gone (removed once its batch landed)")
            return None


def discard_runs(folder: Folder, run_ids: list[str]) -> None:
    """Remove the handoff of runs whose batch has landed, and of runs whose newest file is a day old."""
    for run_id in run_ids:
        folder.delete_tree(run_id)
    newest: dict[str, float] = {}
    try:
        for name, modified in folder.entries():
            run = name.split("/", 1)[0]
            newest[run] = max(newest.get(run, 0.0), modified)
    except OSError:
        return  # the sweep of old runs waits for the next landing
    cutoff = time.time() - STALE_AFTER_S
    for run, modified in newest.items():
        if modified < cutoff:
            folder.delete_tree(run)
