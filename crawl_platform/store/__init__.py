"""The crawl store, the engine's one way to the lake: the only package that holds SQL.

It is the lowest layer above the plain modules (``config``, ``urls``, ``patterns``,
``redaction``, ``states``) and imports nothing else of the engine. It owns the DuckDB/DuckLake
connection and the lake's schema (database, engine, catalog, location, schema, locks, extensions,
errors, bind) and one module per table or kind of table, each a set of functions that take the
connection of the caller's :meth:`~.database.CrawlStore.read` or :meth:`~.database.CrawlStore.write` and plain
values, and return plain values: crawls, frontier, schedules, pages, batches, hosts, revisits,
page_events, records, duplicates, documents_markdown, check_rows, exports. A caller that needs
several in one snapshot or one transaction opens it once and passes it to each. The lake as a
whole is moved by transfer and kept small by maintenance; session is a SQL session of its own,
read-only unless asked (lockdown).
"""
