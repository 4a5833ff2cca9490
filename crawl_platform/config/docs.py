"""The settings reference, ``docs/settings.md``, written from the settings models.

Each concern's settings class (:mod:`~crawl_platform.config.bus`, ``lake``, ``storage``, ``runs``,
``fetch``, ``render``, ``operations``) becomes one table: every field's environment variable, its default, the values it
accepts (from its type and bounds) and its ``Field`` description. ``tests/unit/test_readme.py``
checks that the committed page is this module's output, so a setting cannot go undocumented or
drift from its page.

    python -m crawl_platform.config.docs > docs/settings.md
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from crawl_platform.config import Settings
from crawl_platform.config.bus import BusSettings
from crawl_platform.config.fetch import FetchSettings
from crawl_platform.config.lake import LakeSettings
from crawl_platform.config.operations import OperationsSettings
from crawl_platform.config.render import RenderSettings
from crawl_platform.config.runs import RunSettings
from crawl_platform.config.storage import ObjectStoreSettings

#: The settings classes in the order the page lists them, each with its section title.
SECTIONS: tuple[tuple[str, type[BaseSettings]], ...] = (
    ("Kafka", BusSettings),
    ("The lake, the raw archive and Dagster's home", LakeSettings),
    ("Object storage", ObjectStoreSettings),
    ("Runs: batching and execution", RunSettings),
    ("Fetching and parsing", FetchSettings),
    ("JavaScript rendering", RenderSettings),
    ("Operating crawls: defaults, alerts, monitoring, revisits", OperationsSettings),
)

_HEADER = """\
# Settings

<!-- Written by `python -m crawl_platform.config.docs > docs/settings.md` from the settings models in
crawl_platform/config/. Edit a field's description there, not this page: tests/unit/test_readme.py
fails when the two differ. -->

Every setting is an environment variable, read into one typed `Settings` object
(`crawl_platform/config/`). Set it in the environment of every process that reads it: the Dagster
code server, daemon and webserver, the run workers, the Celery workers and the CLI (the processes
`crawl-platform up` starts inherit its environment). Lists and objects are written as JSON. A value
that does not fit its type or bounds is refused: the CLI prints one line naming the variable and
exits 2.
"""


def render() -> str:
    """The whole ``docs/settings.md`` page."""
    covered = [name for _, cls in SECTIONS for name in cls.model_fields]
    if sorted(covered) != sorted(Settings.model_fields):
        raise RuntimeError("a settings class is missing from crawl_platform.config.docs.SECTIONS")
    parts = [_HEADER]
    for title, cls in SECTIONS:
        module = cls.__module__.rsplit(".", 1)[-1]
        summary = (cls.__doc__ or "").strip().splitlines()[0].rstrip(".")
        parts.append(f"\n## {title}\n\n{summary} (`crawl_platform/config/{module}.py`).\n\n")
        parts.append("| Variable | Default | Values | Description |\n|---|---|---|---|\n")
        for name, field in cls.model_fields.items():
            cells = (f"`{Settings.env_var(name)}`", _default(field), _values(field), field.description or "")
            parts.append("| " + " | ".join(_cell(c) for c in cells) + " |\n")
    return "".join(parts)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value == "":
        return "empty"
    return f"`{_literal(value)}`"


def _literal(value: Any) -> str:
    """A value as it is written in the environment."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Path):
        return value.as_posix()
    return str(value)


def _values(field: FieldInfo) -> str:
    """What the field accepts, from its type and bounds: choices, a range, or a kind of value."""
    annotation = field.annotation
    origin = get_origin(annotation)
    if origin is Literal:
        return ", ".join(f"`{choice}`" for choice in get_args(annotation))
    if annotation in (int, float):
        return " ".join(["integer" if annotation is int else "number", *_bounds(field)])
    kinds: dict[object, str] = {bool: "`true`, `false`", list: "JSON list", dict: "JSON object", Path: "path"}
    return kinds.get(origin or annotation, "")


def _bounds(field: FieldInfo) -> list[str]:
    """The field's bounds: ``0 to 3600`` with both ends included, else ``≥ 1``, ``> 0``, ``≤ 64``."""
    ge = gt = le = lt = None
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            ge = bound.ge
        elif isinstance(bound, annotated_types.Gt):
            gt = bound.gt
        elif isinstance(bound, annotated_types.Le):
            le = bound.le
        elif isinstance(bound, annotated_types.Lt):
            lt = bound.lt
    if ge is not None and le is not None:
        return [f"{_literal(ge)} to {_literal(le)}"]
    return [f"{sign} {_literal(value)}" for sign, value in (("≥", ge), (">", gt), ("≤", le), ("<", lt))
            if value is not None]


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    """Print the page, for ``python -m crawl_platform.config.docs > docs/settings.md``."""
    if sys.argv[1:] if argv is None else argv:
        print("usage: python -m crawl_platform.config.docs > docs/settings.md", file=sys.stderr)
        return 2
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
