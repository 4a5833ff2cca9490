"""The README documents every setting and every CLI command (a contract for users)."""

from pathlib import Path

from pydantic import AliasChoices

from crawl_platform.config import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_documented_in_the_readme():
    names = [f.validation_alias.choices[0] for f in Settings.model_fields.values()
             if isinstance(f.validation_alias, AliasChoices)]
    assert len(names) == len(Settings.model_fields)
    assert [n for n in names if f"`{n}`" not in README] == []


def test_every_command_is_documented_in_the_readme():
    for command in ("crawl-platform up", "crawl-platform crawl", "crawl-platform status", "crawl-platform sql",
                    "crawl-platform backup", "crawl-platform restore", "crawl-platform migrate",
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
