"""The instance storage on PostgreSQL keeps its connections open (crawl_platform_dagster/storage.py),
on the machine's real server: statements reuse one server backend, a forked child opens its own, and
the schema found is not asked for again."""

import os

import psycopg2
from dagster import DagsterInstance

from crawl_platform_dagster.instance import write_instance_yaml
from crawl_platform_dagster.storage import POOL_SIZE, PooledPostgresStorage
from tests.dagster.storage_probes import a_sensor_evaluations_worth, statements_while


def _backends(postgres_url: str) -> set[int]:
    """Server processes connected to the test's database, other than the one asking."""
    with psycopg2.connect(postgres_url) as con, con.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return {row[0] for row in cur.fetchall()}


def test_statements_reuse_the_open_connections_instead_of_connecting_each_time(tmp_path, postgres_url):
    write_instance_yaml(tmp_path, postgres_url=postgres_url)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_ref().storage_data.class_name == PooledPostgresStorage.__name__
        instance.get_runs_count()  # run storage
        instance.all_instigator_state()  # schedule storage: the same pool
        held = _backends(postgres_url)
        assert len(held) == 1  # one pooled connection stays open between statements
        for _ in range(20):
            instance.get_runs_count()
            instance.all_instigator_state()
        # Forty statements later the same server backend serves them: none was opened per statement.
        assert _backends(postgres_url) == held


def test_every_instance_of_a_process_shares_its_connections(tmp_path, postgres_url):
    """A code server creates an instance for every sensor evaluation, a Celery worker one per task:
    they must not each keep connections open."""
    write_instance_yaml(tmp_path, postgres_url=postgres_url)
    instances = [DagsterInstance.from_config(str(tmp_path)) for _ in range(10)]
    for instance in instances:
        instance.get_runs_count()
    assert len(_backends(postgres_url)) <= POOL_SIZE
    for instance in instances:
        instance.dispose()


def test_a_forked_child_opens_connections_of_its_own_and_the_parent_keeps_working(tmp_path, postgres_url):
    write_instance_yaml(tmp_path, postgres_url=postgres_url)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        instance.get_runs_count()
        parent_backends = _backends(postgres_url)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: its statements must not run on the parent's connection
            code = 1
            try:
                instance.get_runs_count()
                mine = _backends(postgres_url) - parent_backends
                os.write(write, b"ok" if mine else b"shared")
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _pid, status = os.waitpid(child, 0)
        assert os.WEXITSTATUS(status) == 0
        assert os.read(read, 16) == b"ok"
        assert instance.get_runs_count() == 0  # the parent's pooled connection still answers


def _catalog_statements_while(action) -> list[str]:
    """The statements every engine of this process sent to PostgreSQL's catalog during ``action()``."""
    return statements_while(action, "pg_catalog", "pg_class", "information_schema")


def test_new_instances_and_sensor_ticks_ask_the_catalog_nothing_once_the_schema_was_found(tmp_path, postgres_url):
    """Dagster asks PostgreSQL's catalog for tables and indexes as each storage starts and before
    most schedule-storage statements; a code server creates an instance per sensor evaluation."""
    write_instance_yaml(tmp_path, postgres_url=postgres_url)

    first = _catalog_statements_while(lambda: a_sensor_evaluations_worth(str(tmp_path)))
    assert first  # the first time, the catalog is asked
    later = _catalog_statements_while(lambda: [a_sensor_evaluations_worth(str(tmp_path)) for _ in range(5)])
    assert later == []


def test_a_schema_part_not_found_is_asked_for_again(tmp_path, postgres_url):
    """Only what was found is remembered: an index a later migration builds is seen once it is built."""
    write_instance_yaml(tmp_path, postgres_url=postgres_url)
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert not instance.event_log_storage.has_secondary_index("crawl_test_index")
        assert not instance.schedule_storage.has_built_index("crawl_test_index")
        instance.event_log_storage.enable_secondary_index("crawl_test_index")
        instance.schedule_storage.mark_index_built("crawl_test_index")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.event_log_storage.has_secondary_index("crawl_test_index")
        assert instance.schedule_storage.has_built_index("crawl_test_index")
