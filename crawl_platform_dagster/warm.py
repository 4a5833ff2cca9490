"""The last module the run launcher's fork server imports (``crawl_platform_dagster.launcher``).

Every run is forked from that server and starts with its memory shared, page for page, until it
writes to a page. Three things are done here once, for all of them:

- DuckDB loads the lake's extensions (DuckLake, its catalog's driver, and `httpfs` for a data path in
  object storage) into a throwaway database,
  which is closed again: the extension libraries stay mapped, so a run's own first ``LOAD`` costs
  a fraction of what it would (that saves a large share of a small batch run's CPU). No database or
  connection is left open across the fork. Should it fail, each run loads (and reports) them itself.
- the columns of ``schema.sql`` are read once (an in-memory DuckDB, closed again), which every run
  compares with its lake's when it attaches it (:func:`crawl_platform.store.schema.schema_upgrade`).
- ``gc.freeze()``: Python's cyclic garbage collector writes to every object it examines, so a
  run's first full collection would copy most of the modules preloaded before it. Frozen, the
  imported modules stay shared, and the runs' own objects are collected as usual.
"""

import contextlib
import gc

import duckdb

from crawl_platform.config import Settings
from crawl_platform.store.engine import new_engine
from crawl_platform.store.extensions import ExtensionError, load_extensions, load_object_storage
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.schema import schema_columns


def _map_lake_extensions() -> None:
    location = LakeLocation.from_settings(Settings())
    con = new_engine()
    try:
        load_extensions(con, location.kind)
        if not location.is_local:
            load_object_storage(con)
    finally:
        con.close()


with contextlib.suppress(ExtensionError, duckdb.Error, ValueError):
    _map_lake_extensions()
with contextlib.suppress(duckdb.Error):
    schema_columns()
gc.collect()
gc.freeze()
