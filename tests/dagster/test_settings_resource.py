"""The resources' settings: built once per environment and set of overrides (the crawl and store
resources and the handoff IO manager share them), built again as soon as an environment variable
changes, overridden by the resource's own fields, and frozen (every caller shares them)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from crawl_platform.storage import LocalFolder
from crawl_platform.store.location import LakeLocation
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.resources.handoff import HandoffIOManager
from crawl_platform_dagster.resources.store import CrawlStoreResource


def test_settings_are_built_once_per_environment_and_again_when_it_changes(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(tmp_path / "a"))
    monkeypatch.setenv("CRAWL_HOST_DELAY_MS", "250")
    resource = CrawlSettingsResource()
    first = resource.settings()
    assert resource.settings() is first
    assert CrawlSettingsResource().settings() is first  # another resource of the same config, the same settings
    assert HandoffIOManager().folder() == LocalFolder(Path(first.handoff_dir))
    assert (first.lake_path, first.host_delay_ms) == (tmp_path / "a", 250)

    monkeypatch.setenv("CRAWL_HOST_DELAY_MS", "40")
    changed = resource.settings()
    assert changed is not first
    assert (changed.lake_path, changed.host_delay_ms) == (tmp_path / "a", 40)

    monkeypatch.delenv("CRAWL_HOST_DELAY_MS")
    assert resource.settings().host_delay_ms == type(first).model_fields["host_delay_ms"].default


def test_the_resource_fields_override_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(tmp_path / "env"))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    plain = CrawlSettingsResource().settings()
    own = CrawlSettingsResource(lake_path=str(tmp_path / "own"), kafka_bootstrap_servers="127.0.0.1:2").settings()
    assert (plain.lake_path, plain.kafka_bootstrap_servers) == (tmp_path / "env", "127.0.0.1:1")
    assert (own.lake_path, own.kafka_bootstrap_servers) == (tmp_path / "own", "127.0.0.1:2")


def test_shared_settings_cannot_be_changed_in_place(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(tmp_path))
    settings = CrawlSettingsResource().settings()
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        settings.host_delay_ms = 1  # type: ignore[misc]
    assert settings.model_copy(update={"host_delay_ms": 1}).host_delay_ms == 1  # a changed copy is the way


def test_the_store_resource_reads_the_shared_settings_and_its_own_lake_path(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAWL_LAKE_PATH", str(tmp_path / "env"))
    shared = CrawlSettingsResource().settings()
    assert CrawlStoreResource().store().location == LakeLocation.from_settings(shared)
    own = CrawlStoreResource(lake_path=str(tmp_path / "own")).store().location
    assert own == LakeLocation.from_settings(shared.model_copy(update={"lake_path": tmp_path / "own"}))
    assert own != LakeLocation.from_settings(shared)
