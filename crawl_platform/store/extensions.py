"""The DuckDB extensions the lake needs, loaded from their PyPI wheels and never downloaded.

DuckLake and its catalog drivers (SQLite for the embedded lake, PostgreSQL when scaled out) are
DuckDB extensions, and so is ``httpfs``, which reads and writes a data path in object storage
(``s3://``). The wheels ``duckdb-extension-ducklake``, ``-sqlite``, ``-postgres`` and ``-httpfs`` carry
the binaries for one DuckDB version, installed through ``duckdb-extensions``; autoinstall and
autoload stay off, so DuckDB never reaches for the network. Before anything is loaded, each
wheel's version must be the DuckDB version the project pins, and afterwards each loaded extension
must report the build pinned here: a missing or mismatched wheel is one line saying what to
install. Neighbour: :mod:`crawl_platform.store.database` opens the lake with them.

DuckDB checks an extension's signature at every ``LOAD`` by hashing its whole file, tens of
megabytes for DuckLake and SQLite together, in every process that opens the lake (each batch run,
each CLI command): a large share of a short process's CPU. So the signature of each installed
file is checked once, by a DuckDB that allows nothing unsigned, and the check is recorded beside
the file (its build, size and modification time). The store's own DuckDB
(:func:`~crawl_platform.store.engine.new_engine`) allows unsigned extensions and loads a file so
recorded without hashing it again; a file that changed since, or was never checked, is checked
first. A DuckDB that does not allow unsigned extensions (an analyst's) checks the signature
itself as usual.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import duckdb

DUCKDB_VERSION = "1.5.5"
"""The DuckDB release the extension wheels are built for (pinned in pyproject.toml)."""

# Wheel module -> (the name DuckDB loads it under, the build it reports) for DUCKDB_VERSION.
EXTENSIONS = {
    "ducklake": ("ducklake", "d8a1881e"),
    "sqlite": ("sqlite_scanner", "f79b1db"),
    "postgres": ("postgres_scanner", "41223e5"),
    "httpfs": ("httpfs", "827222f"),
}
CATALOG_EXTENSION = {"sqlite": "sqlite", "postgres": "postgres"}
VERIFIED_SUFFIX = ".crawl-platform-verified"
"""The record, beside an installed extension file, that its signature was checked."""


class ExtensionError(RuntimeError):
    """An extension wheel is missing or does not match DuckDB; ``str(err)`` says what to install."""


def _install_hint(module: str) -> str:
    return f"pip install 'duckdb=={DUCKDB_VERSION}' 'duckdb-extension-{module}=={DUCKDB_VERSION}' 'duckdb-extensions'"


def check_versions(modules: list[str]) -> None:
    """Raise :class:`ExtensionError` unless DuckDB and every wheel in ``modules`` are the pinned
    version."""
    if duckdb.__version__ != DUCKDB_VERSION:
        raise ExtensionError(f"DuckDB {duckdb.__version__} is installed, the lake needs {DUCKDB_VERSION}: "
                             f"{_install_hint(modules[0])}")
    for module in modules:
        try:
            version = metadata.version(f"duckdb-extension-{module}")
        except metadata.PackageNotFoundError:
            raise ExtensionError(f"the DuckDB extension {module} is not installed: {_install_hint(module)}") from None
        if version != DUCKDB_VERSION:
            raise ExtensionError(f"duckdb-extension-{module} {version} does not match DuckDB {DUCKDB_VERSION}: "
                                 f"{_install_hint(module)}")


def load_extensions(con: duckdb.DuckDBPyConnection, catalog_kind: str) -> None:
    """Load DuckLake and the driver of ``catalog_kind`` (``sqlite`` or ``postgres``) into ``con``."""
    if catalog_kind not in CATALOG_EXTENSION:
        raise ExtensionError(f"unknown lake catalog kind {catalog_kind!r}: use sqlite:PATH or postgres:DSN")
    _load(con, ["ducklake", CATALOG_EXTENSION[catalog_kind]])


def load_object_storage(con: duckdb.DuckDBPyConnection) -> None:
    """Load ``httpfs`` into ``con``: what a lake whose data path is ``s3://…`` needs besides
    :func:`load_extensions`."""
    _load(con, ["httpfs"])


def _load(con: duckdb.DuckDBPyConnection, modules: list[str]) -> None:
    check_versions(modules)
    from duckdb_extensions import import_extension  # noqa: PLC0415 - imports duckdb's own modules

    folder = _extension_folder(con)
    for module in modules:
        name, build = EXTENSIONS[module]
        if _installed_build(folder, name) != build:
            with _install_lock():  # processes starting at once must not install over each other
                if _installed_build(folder, name) != build:
                    # Copies the wheel's binary into DuckDB's extension folder (once per machine and
                    # build); DuckDB writes a temporary file and renames it, so a process loading the
                    # previous copy meanwhile is unaffected.
                    import_extension(module, force_install=True, con=con)
        if _allows_unsigned(con) and not _verified(folder, name, build):
            _verify_signature(con, folder, module, name, build)
        con.execute(f"LOAD {name}")
        row = con.execute("SELECT extension_version FROM duckdb_extensions() WHERE extension_name = ?",
                          [name]).fetchone()
        if row is None or row[0] != build:
            raise ExtensionError(f"the loaded {name} extension reports build {row[0] if row else None}, "
                                 f"expected {build}: {_install_hint(module)}")


def _allows_unsigned(con: duckdb.DuckDBPyConnection) -> bool:
    (allowed,) = con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone() or (False,)
    return bool(allowed)


def _stamp(folder: Path, name: str, build: str) -> str:
    """What the verified record says of the installed file: its build, size and modification time."""
    stat = (folder / f"{name}.duckdb_extension").stat()
    return f"{build} {stat.st_size} {stat.st_mtime_ns}"


def _verified(folder: Path, name: str, build: str) -> bool:
    try:
        return (folder / f"{name}.duckdb_extension{VERIFIED_SUFFIX}").read_text() == _stamp(folder, name, build)
    except OSError:
        return False


def _verify_signature(con: duckdb.DuckDBPyConnection, folder: Path, module: str, name: str, build: str) -> None:
    """Load ``name`` once in a throwaway DuckDB that allows nothing unsigned (it checks the file's
    signature), install it from its wheel again if the check fails, and record the check."""
    (directory,) = con.execute("SELECT current_setting('extension_directory')").fetchone() or ("",)
    config: dict[str, str | bool | int | float | list[str]] = {
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        "allow_unsigned_extensions": False}
    if directory:
        config["extension_directory"] = str(directory)
    for attempt in range(2):
        checker = duckdb.connect(config=config)
        try:
            checker.execute(f"LOAD {name}")
            break
        except duckdb.Error as err:
            if attempt:
                raise ExtensionError(f"the installed {name} extension in {folder} fails DuckDB's signature "
                                     f"check ({str(err).splitlines()[0]}): {_install_hint(module)}") from None
            from duckdb_extensions import import_extension  # noqa: PLC0415

            with _install_lock():
                import_extension(module, force_install=True, con=checker)
        finally:
            checker.close()
    record = folder / f"{name}.duckdb_extension{VERIFIED_SUFFIX}"
    temporary = record.with_name(f"{record.name}.{os.getpid()}")
    temporary.write_text(_stamp(folder, name, build))
    temporary.replace(record)  # processes checking at once each write a whole record


def _extension_folder(con: duckdb.DuckDBPyConnection) -> Path:
    """Where DuckDB installs extensions for this version and platform (``extension_directory``,
    by default ``~/.duckdb/extensions``)."""
    (configured,) = con.execute("SELECT current_setting('extension_directory')").fetchone() or ("",)
    root = Path(configured).expanduser() if configured else Path.home() / ".duckdb" / "extensions"
    (platform,) = con.execute("PRAGMA platform").fetchone() or ("",)
    return root / f"v{DUCKDB_VERSION}" / str(platform)


def _installed_build(folder: Path, name: str) -> str | None:
    """The build of ``name`` installed in ``folder``, read from its install record without loading
    it (None when it is not installed there). Not from ``duckdb_extensions()``: a copy left behind
    by an install that was killed (``<name>.duckdb_extension.tmp-*``) can stand in there for the
    real one, and every start would install again (the whole file copied each time)."""
    if not (folder / f"{name}.duckdb_extension").is_file():
        return None
    try:
        info = (folder / f"{name}.duckdb_extension.info").read_bytes()
    except OSError:
        return None
    return next((build for _name, build in EXTENSIONS.values() if build.encode() in info), None)


@contextmanager
def _install_lock() -> Iterator[None]:
    folder = Path.home() / ".duckdb"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "crawl-platform-extensions.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
