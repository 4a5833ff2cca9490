"""One typed settings object for the whole platform.

Every knob the engine, the Dagster layer and the CLI read lives in :class:`Settings`, with the
environment variable that sets it. Nothing else in the code base calls ``os.getenv``: components
take plain values in ``__init__`` and a ``from_settings`` classmethod wires them from this object.
The fields are declared by concern, one module each: :mod:`~crawl_platform.config.bus` (Kafka),
:mod:`~crawl_platform.config.lake` (the store),
:mod:`~crawl_platform.config.storage` (object storage), :mod:`~crawl_platform.config.runs` (batching and
execution), :mod:`~crawl_platform.config.fetch` (fetching and parsing), :mod:`~crawl_platform.config.render`
(JavaScript rendering) and
:mod:`~crawl_platform.config.operations` (crawl defaults, alerts, monitoring, revisits).
"""

from __future__ import annotations

import json
import os

from pydantic import AliasChoices, SecretStr
from pydantic_settings import SettingsConfigDict

from crawl_platform.config.bus import BusSettings
from crawl_platform.config.fetch import FetchSettings
from crawl_platform.config.lake import LakeSettings
from crawl_platform.config.operations import OperationsSettings, Scope
from crawl_platform.config.render import RenderSettings
from crawl_platform.config.runs import RunSettings
from crawl_platform.config.storage import ObjectStoreSettings

__all__ = ["Scope", "Settings"]


class Settings(
    OperationsSettings, RenderSettings, FetchSettings, RunSettings, ObjectStoreSettings, LakeSettings, BusSettings
):
    """Platform settings; each field is read from the environment variable named in its alias."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    # Here, not in runs.py: the rule needs the batch settings and the fetch delay.
    def partition_batch_size(self, hosts_per_partition: float = 1.0) -> int:
        """Messages per partition per run: ``CRAWL_BATCH_SIZE``, or (auto) what the partition's
        hosts serve in ``CRAWL_BATCH_SECONDS`` at the politeness delay: one host's share (at least
        10 ms a request) times the hosts a partition holds (``hosts_per_partition``, at least one;
        a host's requests follow one another, different hosts' run side by side), kept between
        100 (few runs are worth their start) and 5,000 (memory of one run)."""
        if self.batch_size:
            return self.batch_size
        per_request_s = max(self.host_delay_ms, 10) / 1000.0
        return max(100, min(5_000, int(self.batch_seconds / per_request_s * max(1.0, hosts_per_partition))))

    @classmethod
    def env_var(cls, name: str) -> str:
        """The environment variable that sets the field ``name``."""
        alias = cls.model_fields[name].validation_alias
        return str(alias.choices[0]) if isinstance(alias, AliasChoices) else name.upper()

    def to_env(self) -> dict[str, str]:
        """Every setting as the environment variable that sets it (hands settings to child processes)."""
        env = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):  # a child process needs the secret itself
                value = value.get_secret_value()
            if value == "" and name in ObjectStoreSettings.model_fields:
                continue  # boto3 reads the AWS variables itself, and takes an empty one for a value
            env[self.env_var(name)] = json.dumps(value) if isinstance(value, dict | list) else str(value)
        return env

    def secrets(self) -> dict[str, str]:
        """The environment, for ``${VAR}`` references in settings such as proxy passwords."""
        return dict(os.environ)
