"""The docs a user reads cover the code (a contract for users): every setting in docs/settings.md,
written from the settings models; every command; every table and column; the module map."""

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices

from crawl_platform.config import Settings
from crawl_platform.config.docs import render
from crawl_platform.store.schema import schema_columns
from crawl_platform_dagster.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_setting_has_an_environment_variable_and_a_description():
    fields = Settings.model_fields.values()
    assert all(isinstance(f.validation_alias, AliasChoices) for f in fields)
    assert [Settings.env_var(name) for name, f in Settings.model_fields.items() if not f.description] == []


def test_docs_settings_md_is_the_generators_output():
    page = (ROOT / "docs" / "settings.md").read_text()
    assert page == render(), "run: .venv/bin/python -m crawl_platform.config.docs > docs/settings.md"
    assert [n for n in map(Settings.env_var, Settings.model_fields) if f"| `{n}` |" not in page] == []


def test_the_readme_gives_the_two_commands_and_docs_commands_md_every_command(capsys):
    assert "make run" in README
    assert "make test" in README
    with pytest.raises(SystemExit):
        main(["--help"])
    names = re.search(r"\{([a-z,]+)\}", capsys.readouterr().out).group(1).split(",")
    assert len(names) > 10
    commands = (ROOT / "docs" / "commands.md").read_text()
    assert [n for n in names if f"crawl-platform {n} " not in commands] == []


def test_the_module_map_names_every_engine_and_dagster_module():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index("## Module map"):]
    section = section[:section.index("\n## ")]
    modules = [p for p in (ROOT / "crawl_platform").rglob("*.py") if p.name != "__init__.py"]
    modules += [p for package in ("crawl_platform_dagster", "assets", "sensors", "resources")
                for p in (ROOT / package).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) > 40
    assert [str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in section] == []


def test_docs_tables_md_gives_every_table_and_column_of_the_schema_with_its_type():
    page = (ROOT / "docs" / "tables.md").read_text()
    missing = []
    for table, columns in schema_columns().items():
        assert f"\n## `{table}`\n" in page, table
        section = page[page.index(f"\n## `{table}`\n") + 1:]
        section = section[:section.index("\n## ")] if "\n## " in section else section
        missing += [f"{table}.{column} {kind}" for column, kind in columns.items()
                    if f"| `{column}` | {kind} |" not in section]
    assert missing == []


def test_only_the_two_crawl_platform_packages_are_installed():
    import tomllib  # noqa: PLC0415

    setup = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"]
    tops = {name.split(".")[0] for name in setup["packages"]}
    assert tops == {"crawl_platform", "crawl_platform_dagster"}
    assert "py-modules" not in setup
