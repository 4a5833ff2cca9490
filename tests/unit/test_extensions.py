"""The lake's DuckDB extensions: installed from their wheels once, loaded from there after, their
signatures checked once per installed file, and a wrong or missing wheel named in one line with
what to install."""

import os
from importlib import metadata
from pathlib import Path

import duckdb
import pytest

from crawl_platform.store import extensions
from crawl_platform.store.extensions import EXTENSIONS, ExtensionError, load_extensions


def connect(folder: Path, unsigned: bool = False) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                                  "extension_directory": str(folder), "allow_unsigned_extensions": unsigned})


def loaded(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT extension_name, extension_version FROM duckdb_extensions() WHERE loaded")
                .fetchall())


def installed(folder: Path) -> dict[str, int]:
    """Each installed extension file and its modification time (ns)."""
    return {p.name: p.stat().st_mtime_ns for p in folder.rglob("*.duckdb_extension*")}


def test_the_first_process_installs_the_wheels_and_later_ones_only_load_them(tmp_path):
    first = connect(tmp_path)
    load_extensions(first, "sqlite")
    before = installed(tmp_path)
    assert {"ducklake.duckdb_extension", "sqlite_scanner.duckdb_extension"} <= set(before)
    # A killed install leaves its temporary copy behind; DuckDB then reports that copy as the
    # installed one, which must not make every later start install again.
    (next(tmp_path.rglob("ducklake.duckdb_extension")).parent
     / "ducklake.duckdb_extension.tmp-0123.duckdb_extension").write_bytes(b"partial")
    again = connect(tmp_path)
    load_extensions(again, "sqlite")
    assert {name: mtime for name, mtime in installed(tmp_path).items() if ".tmp-" not in name} == before
    loaded = dict(again.execute("SELECT extension_name, extension_version FROM duckdb_extensions() WHERE loaded")
                  .fetchall())
    assert loaded["ducklake"] == EXTENSIONS["ducklake"][1]
    assert loaded["sqlite_scanner"] == EXTENSIONS["sqlite"][1]


def test_an_install_of_another_build_is_replaced(tmp_path):
    load_extensions(connect(tmp_path), "sqlite")
    info = next(tmp_path.rglob("ducklake.duckdb_extension.info"))
    info.write_bytes(info.read_bytes().replace(EXTENSIONS["ducklake"][1].encode(), b"00000000"))
    os.utime(info, ns=(0, 0))
    load_extensions(connect(tmp_path), "sqlite")
    assert EXTENSIONS["ducklake"][1].encode() in info.read_bytes()


def test_a_wheel_of_another_duckdb_version_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    real = metadata.version
    monkeypatch.setattr(extensions.metadata, "version",
                        lambda dist: "1.4.0" if dist == "duckdb-extension-sqlite" else real(dist))
    with pytest.raises(ExtensionError) as err:
        load_extensions(connect(tmp_path), "sqlite")
    assert str(err.value) == ("duckdb-extension-sqlite 1.4.0 does not match DuckDB 1.5.5: pip install "
                              "'duckdb==1.5.5' 'duckdb-extension-sqlite==1.5.5' 'duckdb-extensions'")


def test_a_missing_wheel_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    def version(dist: str) -> str:
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(extensions.metadata, "version", version)
    with pytest.raises(ExtensionError, match=r"^the DuckDB extension ducklake is not installed: pip install "):
        load_extensions(connect(tmp_path), "postgres")


def test_an_unknown_catalog_kind_is_named(tmp_path):
    with pytest.raises(ExtensionError, match="unknown lake catalog kind 'mysql'"):
        load_extensions(connect(tmp_path), "mysql")


def test_the_store_checks_a_signature_once_per_installed_file(tmp_path):
    """The store's DuckDB allows unsigned extensions, so that a load does not hash 70 MB again:
    the signature of each installed file is checked once, and again only when the file changed."""
    load_extensions(connect(tmp_path, unsigned=True), "sqlite")
    records = {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob(f"*{extensions.VERIFIED_SUFFIX}")}
    assert set(records) == {f"ducklake.duckdb_extension{extensions.VERIFIED_SUFFIX}",
                            f"sqlite_scanner.duckdb_extension{extensions.VERIFIED_SUFFIX}"}
    again = connect(tmp_path, unsigned=True)
    load_extensions(again, "sqlite")
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob(f"*{extensions.VERIFIED_SUFFIX}")} == records
    assert loaded(again)["ducklake"] == EXTENSIONS["ducklake"][1]
    # A file replaced behind our back (same name, same install record) fails the check, is installed
    # from its wheel again, checked, and loaded: an unsigned DuckDB never loads what it was not.
    binary = next(tmp_path.rglob("ducklake.duckdb_extension"))
    replacement = binary.with_name("replacement")
    replacement.write_bytes(b"\x7fELF not an extension")
    replacement.replace(binary)  # a new file, as installs write them: this process maps the old one
    third = connect(tmp_path, unsigned=True)
    load_extensions(third, "sqlite")
    assert loaded(third)["ducklake"] == EXTENSIONS["ducklake"][1]
    assert binary.stat().st_size > 1_000_000


def test_a_duckdb_that_allows_nothing_unsigned_checks_signatures_itself(tmp_path):
    con = connect(tmp_path)
    load_extensions(con, "sqlite")
    assert loaded(con)["sqlite_scanner"] == EXTENSIONS["sqlite"][1]
    assert not list(tmp_path.rglob(f"*{extensions.VERIFIED_SUFFIX}"))
