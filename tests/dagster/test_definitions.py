"""The Definitions module loads, and wires every job, sensor, asset and check together."""

from dagster import AssetKey

from crawl_platform_dagster.definitions import defs


def test_definitions_load_with_every_part():
    repo = defs.get_repository_def()
    assert {"crawl_batch_job", "crawl_intake_job", "submit_crawl_job", "lake_maintenance_job",
            "lake_backup_job", "crawl_control_job", "cancel_crawl_job", "pause_crawl_job",
            "resume_crawl_job", "records_job"} <= {j.name for j in repo.get_all_jobs()}
    assert {s.name for s in repo.sensor_defs} == {"frontier_sensor", "seeds_sensor", "quality_sensor",
                                                  "run_failure_alert_sensor", "quality_alert_sensor",
                                                  "stall_alert_sensor", "crawl_progress_sensor",
                                                  "batch_retention_sensor", "recurring_crawls",
                                                  "control_sensor", "records_sensor", "content_automation_sensor"}
    assert {s.name for s in repo.schedule_defs} == {"recrawl_daily", "lake_maintenance_daily"}
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"crawls", "pages", "documents", "links", "frontier", "lake_maintenance", "exports",
                    "crawl_progress", "records", "near_duplicates", "documents_markdown"}
    assert graph.get(AssetKey("records")).parent_keys == {AssetKey("pages")}
    assert graph.get(AssetKey("documents_markdown")).parent_keys == {AssetKey("pages"), AssetKey("documents")}
    assert graph.get(AssetKey("exports")).parent_keys == {AssetKey("pages"), AssetKey("documents"), AssetKey("links")}
    assert graph.get(AssetKey("near_duplicates")).parent_keys == {AssetKey("documents")}
    assert graph.get(AssetKey("frontier")).parent_keys == {AssetKey("pages"), AssetKey("links")}
    assert AssetKey("crawls") in graph.get(AssetKey("pages")).parent_keys
    checks = {c.name for c in graph.asset_check_keys}
    assert {"pages_quality", "documents_quality", "recurring_crawls_on_schedule", "records_null_rate",
            "records_type_errors"} <= checks
    for key in ("pages", "documents", "links", "frontier", "lake_maintenance", "near_duplicates"):
        assert graph.get(AssetKey(key)).code_version
