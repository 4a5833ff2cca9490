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
    for command in ("crawl-platform up", "crawl-platform crawl", "crawl-platform status", "make run", "make test"):
        assert command in README
