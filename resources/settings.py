"""The platform settings as the Dagster layer's resources read them, built once per environment.

Building :class:`~crawl_platform.config.Settings` is not free (pydantic-settings reads every
variable), and every sensor tick, step and handoff asks for them (the code server several times a
second). :func:`platform_settings` builds the settings of one environment and one set of
overrides once per process (a later call is a dictionary lookup), and again as soon as any
variable changes. Settings are frozen, so every caller may share them. Neighbours: :mod:`.crawl`,
:mod:`.store` and :mod:`.handoff` read their settings here.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from crawl_platform.config import Settings


def platform_settings(**overrides: Any) -> Settings:
    """The settings of the current environment, with ``overrides`` (fields by name) on top."""
    return _settings(frozenset(overrides.items()), frozenset(os.environ.items()))


@functools.lru_cache(maxsize=8)
def _settings(overrides: frozenset[tuple[str, Any]], environ: frozenset[tuple[str, str]]) -> Settings:
    """``environ`` is the cache's key only: Settings reads ``os.environ`` itself."""
    return Settings(**dict(overrides))
