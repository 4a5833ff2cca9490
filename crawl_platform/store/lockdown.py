"""A read-only ``crawl-platform sql`` session reads the lake and nothing else.

Attaching the lake ``READ_ONLY`` stops writes to its tables, but a DuckDB session reaches further:
another ``ATTACH`` (of the same catalog, read-write), ``COPY ... TO`` and ``EXPORT`` write files,
``LOAD`` and ``INSTALL`` add extensions, table functions read any file or database, and DuckLake's
maintenance functions write and delete files on the lake's data path before the read-only catalog
refuses their commit (``ducklake_cleanup_old_files`` deletes the files it finds scheduled). Two
layers close it, each for what it can see:

- :func:`lock_down` sets DuckDB itself: no file or network access except to the lake's data path
  (the catalog, attached before, stays readable), no extension autoloaded, installed or loaded, no
  persistent secret, and the configuration locked so the session cannot undo any of it (the
  settings in :data:`FREE_SETTINGS` only change how results are computed and stay settable).
- :func:`refusal` checks each statement before it runs. Only kinds of statement that read, or
  change nothing but the session's own memory (temporary tables, variables), run; changes to the
  lake itself are DuckDB's to refuse, on the read-only attach. And no statement may call a
  function that changes the lake (DuckLake's maintenance, ``CHECKPOINT``), runs SQL given as text,
  reaches a database directly rather than through the lake, or writes log or profile files. Calls
  are found with DuckDB's own tokenizer, so names in strings and comments do not count and quoting
  or case do not hide one.

DuckDB has no read-only file access, so the data path stays writable to the session's functions:
what writes there is the statement check's to refuse. A view stored in the lake that calls such a
function is not seen (only a session with write access creates one).
Neighbour: :mod:`.session` runs the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import duckdb

from crawl_platform.store.location import LakeLocation

Tokens = list[tuple[int, duckdb.token_type]]  # what duckdb.tokenize gives: (start, kind) of each token

FREE_SETTINGS = ("threads", "memory_limit", "TimeZone", "Calendar", "default_order", "default_null_order")
"""The settings a read-only session may still change: they change how results are computed."""

SESSION_KINDS = frozenset({
    "SELECT", "EXPLAIN", "CALL", "SET", "TRANSACTION", "VARIABLE_SET",
    "CREATE", "CREATE_FUNC", "DROP", "ALTER", "INSERT", "UPDATE", "DELETE", "MERGE_INTO",
})
"""The kinds of statement a read-only session runs (``SHOW``, ``DESCRIBE``, ``SUMMARIZE`` and the
PRAGMAs that read are SELECTs). Any other kind, including one a later DuckDB adds, is refused."""

KIND_REASONS = {
    "ATTACH": "ATTACH opens another database",
    "DETACH": "DETACH closes a database",
    "COPY": "COPY reads and writes files",
    "COPY_DATABASE": "COPY FROM DATABASE copies a database",
    "EXPORT": "EXPORT DATABASE writes files",
    "LOAD": "LOAD and INSTALL add extensions",
    "UPDATE EXTENSIONS": "UPDATE EXTENSIONS installs extensions",
    "PRAGMA": "this PRAGMA changes the database or the session",
    "PREPARE": "a prepared statement would run unchecked",
    "EXECUTE": "a prepared statement would run unchecked",
}

DUCKLAKE_READS = frozenset({
    "current_snapshot", "last_committed_snapshot", "list_files", "options", "scan", "settings", "snapshots",
    "table_changes", "table_deletions", "table_info", "table_insertions",
})
"""DuckLake's functions that only read (``ducklake_NAME``, some also ``lake.NAME``). Every other
``ducklake_`` function is refused, including one a later DuckLake adds."""

DUCKLAKE_WRITES = frozenset({
    "add_data_files", "cleanup_old_files", "commit", "delete_orphaned_files", "expire_snapshots",
    "flush_inlined_data", "merge_adjacent_files", "rewrite_data_files", "set_commit_message", "set_option",
})
"""DuckLake's functions that change the lake, under their names without ``ducklake_`` too: the
lake's own macros (``lake.merge_adjacent_files()``, ``lake.set_option(...)``) call them."""

FUNCTION_REASONS = {
    "checkpoint": "writes the lake's files",
    "force_checkpoint": "writes the lake's files",
    "query": "runs SQL given as text",
    "json_execute_serialized_sql": "runs SQL given as text",
    "enable_logging": "writes log files",
    "truncate_duckdb_logs": "changes log files",
    "enable_profiling": "writes profile files",
}

OTHER_DATABASES = ("postgres_", "sqlite_")
"""The catalog drivers' functions: each opens a database file or server itself (``sqlite_scan``
reads any SQLite file, past DuckDB's file checks; ``postgres_execute`` runs SQL on the catalog)."""


def lock_down(con: duckdb.DuckDBPyConnection, location: LakeLocation) -> None:
    """Restrict ``con``, which has the lake at ``location`` attached, to reading it, for good:
    no file or network access but the lake's data path, no extension loaded, the configuration
    locked. (Autoloading and autoinstalling extensions are off in every engine the store opens.)"""
    con.execute("SET allowed_directories = ?", [[location.data_path]])
    con.execute("SET enable_external_access = false")
    con.execute("SET allow_community_extensions = false")
    con.execute("SET allowed_configs = ?", [list(FREE_SETTINGS)])
    con.execute("SET lock_configuration = true")


def refusal(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> str | None:
    """Why a read-only session must not run ``statement`` (one of ``con.extract_statements``), as
    a phrase (``COPY reads and writes files``), or None when it may."""
    kind = statement.type.name
    sql = str(statement.query)
    tokens = duckdb.tokenize(sql)
    if kind not in SESSION_KINDS:
        if not kind.isidentifier():  # a kind the Python enum has no name for ("???": UPDATE EXTENSIONS)
            kind = f"{_word(sql, tokens, 0)} {_word(sql, tokens, 1)}".upper()
        return KIND_REASONS.get(kind, f"{_word(sql, tokens, 0).upper() or kind} statements are not allowed")
    if kind == "CALL" and _word(sql, tokens, 0) != "call":  # CHECKPOINT and FORCE CHECKPOINT
        return "CHECKPOINT writes the lake's files"
    for name in _calls(sql, tokens):
        reason = call_refusal(name)
        if reason is not None:
            return f"{name}() {reason}"
    if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains
        return _explained_refusal(con, sql, tokens)
    return None


def call_refusal(name: str) -> str | None:
    """Why a read-only session must not call the function ``name`` (lowercase, unqualified), or
    None when it may."""
    if name in FUNCTION_REASONS:
        return FUNCTION_REASONS[name]
    base = name.removeprefix("ducklake_")
    if base in DUCKLAKE_WRITES or (base != name and base not in DUCKLAKE_READS):
        return "changes the lake"
    if name.startswith(OTHER_DATABASES):
        return "reaches a database directly, not through the lake"
    return None


def _word(sql: str, tokens: Tokens, i: int) -> str:
    """The keyword or identifier ``tokens[i]`` of ``sql`` spells ("" past the end)."""
    return _identifier(sql[tokens[i][0]:]) if i < len(tokens) else ""


def _calls(sql: str, tokens: Tokens) -> Iterator[str]:
    """The name of each function ``sql`` calls: an identifier (or a keyword used as one, such as
    ``checkpoint``) right before ``(``; for ``lake.snapshots()``, ``snapshots``."""
    for (start, kind), (after, next_kind) in pairwise(tokens):
        if (kind in (duckdb.token_type.identifier, duckdb.token_type.keyword)
                and next_kind == duckdb.token_type.operator and sql[after] == "("):
            yield _identifier(sql[start:after])


def _identifier(text: str) -> str:
    """The name a token spells (its text runs on to the next token, through any comment), as
    DuckDB resolves it: unquoted and case-insensitive."""
    if text.startswith('"'):
        name, i = [], 1
        while i < len(text):
            if text[i] == '"':
                if text[i + 1:i + 2] != '"':
                    break
                i += 1
            name.append(text[i])
            i += 1
        return "".join(name).lower()
    end = 0
    while end < len(text) and (text[end].isalnum() or text[end] in "_$"):
        end += 1
    return text[:end].lower()


def _explained_refusal(con: duckdb.DuckDBPyConnection, sql: str, tokens: Tokens) -> str | None:
    """The refusal of the statement an ``EXPLAIN [ANALYZE] [(options)]`` explains."""
    i = 2 if _word(sql, tokens, 1) in ("analyze", "analyse") else 1
    if i >= len(tokens):
        return None
    inner = sql[tokens[i][0]:]
    try:
        statements = con.extract_statements(inner)
    except duckdb.Error:
        if not inner.startswith("("):
            raise
        statements = con.extract_statements(inner[_after_parentheses(inner):])  # EXPLAIN (FORMAT json) ...
    return next((r for r in (refusal(con, s) for s in statements) if r is not None), None)


def _after_parentheses(sql: str) -> int:
    """Where the parenthesised group ``sql`` starts with ends."""
    depth = 0
    for start, kind in duckdb.tokenize(sql):
        if kind == duckdb.token_type.operator:
            depth += {"(": 1, ")": -1}.get(sql[start], 0)
            if depth == 0:
                return start + 1
    return len(sql)
