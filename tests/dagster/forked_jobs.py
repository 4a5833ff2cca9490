"""Jobs the run-launcher tests start in forked processes (importable by module name, as a run's
code origin must be)."""

import os
import time
from pathlib import Path

from dagster import Config, OpExecutionContext, in_process_executor, job, op


class MarkConfig(Config):
    folder: str
    sleep_s: float = 0.0


@op
def write_pid(context: OpExecutionContext, config: MarkConfig) -> None:
    """Writes its process id and the PPID to ``folder/pid``, then sleeps ``sleep_s``."""
    Path(config.folder, "pid").write_text(f"{os.getpid()} {os.getppid()}")
    context.log.info("wrote the pid")
    time.sleep(config.sleep_s)


@job(executor_def=in_process_executor)
def mark_job() -> None:
    write_pid()
