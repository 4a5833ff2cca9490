"""The last module the run launcher's fork server imports (``crawl_platform_dagster.launcher``).

Every run is forked from that server and starts with its memory shared, page for page, until it
writes to a page. Python's cyclic garbage collector writes to every object it examines, so a run's
first full collection would copy most of the modules preloaded before it. ``gc.freeze()`` moves
everything the server has imported so far into a generation the collector never examines: the
runs' own objects are collected as usual, and the imported modules stay shared.
"""

import gc

gc.collect()
gc.freeze()
