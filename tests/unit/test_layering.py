"""The store is the engine's boundary: ``crawl_platform/store/`` imports nothing from the layers above
it, and nothing outside it runs SQL (feature code asks the store, it does not write queries)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "crawl_platform"
# The plain modules below the store: settings, URL rules, the stored state values, and the folders
# (local or object storage) files are kept in.
BELOW_STORE = {"config", "patterns", "redaction", "states", "storage", "urls"}
# The Dagster layer (crawl_platform_dagster/ reaches the other three through symlinks).
DAGSTER = [ROOT / "crawl_platform_dagster", ROOT / "assets", ROOT / "sensors", ROOT / "resources"]
RUNS_SQL = {"execute", "executemany", "extract_statements", "query", "sql"}  # a DuckDB connection's or the store's
STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|DROP|ALTER|COPY|ATTACH|DETACH|CALL|PRAGMA)\s")


def _modules(*roots: Path) -> list[Path]:
    found = {p.resolve(): p for root in roots for p in root.rglob("*.py")}
    return sorted(found.values())


def _imports(path: Path) -> set[str]:
    """Every ``crawl_platform.*`` module ``path`` imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("crawl_platform.")}


def _package(module: str) -> str:
    """``crawl_platform.store.hosts`` -> ``store``; ``crawl_platform.urls`` -> ``urls``."""
    return module.split(".")[1]


def test_the_store_imports_only_the_plain_modules_below_it():
    above = {f"{path.relative_to(ROOT)} imports {name}"
             for path in _modules(ENGINE / "store") for name in _imports(path)
             if _package(name) not in {*BELOW_STORE, "store"}}
    assert above == set()


def test_the_modules_below_the_store_import_neither_the_store_nor_the_crawl():
    below = [ENGINE / f"{name}.py" for name in ("patterns", "redaction", "states", "urls")]
    above = {f"{path.relative_to(ROOT)} imports {name}" for path in below for name in _imports(path)
             if _package(name) not in BELOW_STORE}
    assert above == set()


def _sql_calls(path: Path) -> list[str]:
    """Calls that run SQL (``con.execute(...)``, ``store.query(...)``, ...) and string literals that
    are SQL statements, with their line numbers; docstrings and messages are not statements."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RUNS_SQL:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.func.attr}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and STATEMENT.match(node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.split()[0]} ...")
    return found


def test_no_module_outside_the_store_runs_sql():
    outside = [p for p in _modules(ENGINE, *DAGSTER) if not p.is_relative_to(ENGINE / "store")]
    assert len(outside) > 80
    assert [call for path in outside for call in _sql_calls(path)] == []


def test_the_check_finds_sql():
    """The check above sees a statement run on a connection, and a query kept in a constant."""
    assert _sql_calls(ENGINE / "store" / "hosts.py")
    assert _sql_calls(ENGINE / "store" / "frontier.py")
