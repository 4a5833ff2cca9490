"""The docs a user reads cover the code (a contract for users): every setting in docs/settings.md,
written from the settings models; every command; the module map."""

from pathlib import Path

from pydantic import AliasChoices

from crawl_platform.config import Settings
from crawl_platform.config.docs import render

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


def test_every_command_is_documented_in_the_readme():
    for command in ("crawl-platform up", "crawl-platform crawl", "crawl-platform status", "crawl-platform sql",
                    "crawl-platform schedule",
                    "crawl-platform backup", "crawl-platform restore", "crawl-platform migrate",
                    "crawl-platform extract",
                    "crawl-platform show", "crawl-platform export",
                    "make run", "make test"):
        assert command in README


def test_the_module_map_names_every_engine_and_dagster_module():
    root = Path(__file__).resolve().parents[2]
    modules = [p for p in (root / "crawl_platform").rglob("*.py") if p.name != "__init__.py"]
    modules += [p for p in (root / "crawl_platform_dagster").glob("*.py") if p.name != "__init__.py"]
    section = README[README.index("### Module map"):README.index("### Durability model")]
    assert len(modules) > 40
    assert [str(p.relative_to(root)) for p in modules if f"`{p.name}`" not in section] == []


def test_only_the_two_crawl_platform_packages_are_installed():
    import tomllib  # noqa: PLC0415

    setup = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"]
    tops = {name.split(".")[0] for name in setup["packages"]}
    assert tops == {"crawl_platform", "crawl_platform_dagster"}
    assert "py-modules" not in setup
