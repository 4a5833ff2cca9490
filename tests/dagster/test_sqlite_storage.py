"""The embedded instance storage on SQLite (crawl_platform_dagster/storage_sqlite.py): one engine
per database file per process instead of one per statement, the schema checked once per process,
a forked child on connections of its own, and several processes writing the same files."""

import multiprocessing
import os

from dagster import DagsterInstance, DagsterRun
from sqlalchemy import event
from sqlalchemy.pool import Pool

from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.storage_sqlite import PooledSqliteStorage
from tests.dagster.storage_probes import a_sensor_evaluations_worth, statements_while


def _connects_while(action) -> int:
    """SQLite connections any engine of this process opened during ``action()``."""
    opened = []
    listener = lambda *_args: opened.append(1)  # noqa: E731
    event.listen(Pool, "connect", listener)
    try:
        action()
    finally:
        event.remove(Pool, "connect", listener)
    return len(opened)


def _schema_statements_while(action) -> list[str]:
    return statements_while(action, "sqlite_master", "alembic_version", "PRAGMA")


def test_the_written_instance_uses_it_and_new_instances_reuse_connections_and_schema_checks(tmp_path):
    write_instance_yaml(tmp_path)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_ref().storage_data.class_name == PooledSqliteStorage.__name__
        assert str(tmp_path.resolve()) in instance.get_ref().storage_data.config_yaml
    a_sensor_evaluations_worth(str(tmp_path))
    assert _connects_while(lambda: [a_sensor_evaluations_worth(str(tmp_path)) for _ in range(5)]) == 0
    assert _schema_statements_while(lambda: [a_sensor_evaluations_worth(str(tmp_path)) for _ in range(5)]) == []


def _add_runs(home: str, prefix: str, count: int) -> None:
    with DagsterInstance.from_config(home) as instance:
        for i in range(count):
            instance.add_run(DagsterRun(job_name="crawl_job", run_id=f"{prefix}-{i:04d}"))
            instance.report_engine_event(f"{prefix} {i}", instance.get_run_by_id(f"{prefix}-{i:04d}"))


def test_processes_writing_at_once_lose_nothing(tmp_path):
    write_instance_yaml(tmp_path)
    _add_runs(str(tmp_path), "parent", 1)  # this process holds open connections while the others write
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_add_runs, args=(str(tmp_path), f"w{n}", 40)) for n in range(3)]
    for writer in writers:
        writer.start()
    _add_runs(str(tmp_path), "parent-late", 20)
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_runs_count() == 1 + 3 * 40 + 20
        logs = instance.all_logs("w2-0039")
        assert [entry.message for entry in logs] == ["w2 39"]


def test_a_forked_child_opens_connections_of_its_own_and_the_parent_keeps_working(tmp_path):
    write_instance_yaml(tmp_path)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        instance.get_runs_count()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            code = 1
            try:
                opened = _connects_while(instance.get_runs_count)
                instance.add_run(DagsterRun(job_name="crawl_job", run_id="from-the-child"))
                os.write(write, b"ok" if opened else b"shared")
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _pid, status = os.waitpid(child, 0)
        assert os.WEXITSTATUS(status) == 0
        assert os.read(read, 16) == b"ok"
        assert instance.get_run_by_id("from-the-child") is not None  # the parent sees the child's write
