"""Seed intake and the lake writer pool: the ``crawls`` asset's network work (sitemaps over HTTP,
re-publishing pending URLs) must not hold the ``crawl_duckdb_writer`` slot that landings wait for."""

import threading

from dagster import AssetExecutionContext, DagsterInstance, asset, materialize

from crawl_platform.bus.offsets import plan_batches
from crawl_platform.pipeline.submission import build_crawl_request, submit_crawl
from crawl_platform.store.database import CrawlStore
from crawl_platform_dagster.assets.intake import crawls
from crawl_platform_dagster.instance import DUCKDB_WRITER_POOL, write_instance_yaml
from tests.dagster.conftest import RESOURCES
from tests.sites.sitemap_site import SitemapSite

LANDED = threading.Event()
"""Set by ``another_runs_landing`` once its transaction committed."""
NO_COMPUTE_LOGS = """compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""


@asset(pool=DUCKDB_WRITER_POOL)
def another_runs_landing(context: AssetExecutionContext) -> None:
    """A writer step of another run: takes the writer pool, then commits a lake transaction."""
    store = CrawlStore.from_settings(RESOURCES["crawl"].settings())
    with store.write() as con:
        con.execute("SELECT count(*) FROM crawls").fetchall()
    context.log.info(f"committed snapshot {store.last_snapshot_id}")
    LANDED.set()


def test_a_landing_commits_while_seed_intake_fetches_sitemaps(crawl_env, bus, store, tmp_path, monkeypatch):
    monkeypatch.setenv("CRAWL_READ_TIMEOUT", "120")  # intake waits for the held sitemap, never gives up on it
    yaml = write_instance_yaml(tmp_path / "home", writer_pool_limit=1)  # the strictest writer pool: one slot
    # No compute-log capture: its `tail -F` helpers took 30 s each to stop on a loaded machine, which
    # held a finished run's materialize() past the test's wait although its step had long committed.
    yaml.write_text(yaml.read_text() + NO_COMPUTE_LOGS)
    LANDED.clear()
    with SitemapSite(pages=3, hold_sitemaps=True) as site, \
            DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        submit_crawl(bus, build_crawl_request([site.base_url + "/"], crawl_id="maps", use_sitemaps=True))
        seed_keys = [r.key for r in plan_batches(bus.watermarks(crawl_env.seeds_topic), {}, 1000, 100).ranges]
        results: dict[str, bool] = {}

        def run(name: str, assets: list, config: dict) -> None:
            results[name] = materialize(assets, instance=instance, resources=RESOURCES, run_config=config,
                                        raise_on_error=False).success

        intake = threading.Thread(target=run, args=("intake", [crawls],
                                                    {"ops": {"crawls": {"config": {"seed_ranges": seed_keys}}}}))
        intake.start()
        assert site.sitemap_asked.wait(60)  # intake is now waiting for the sitemap's answer
        landing = threading.Thread(target=run, args=("landing", [another_runs_landing], {}))
        landing.start()
        # The landing's step commits while intake still waits for the sitemap (which it holds no
        # writer slot for).
        landed_during_fetch = LANDED.wait(60) and intake.is_alive()
        site.release()
        intake.join(120)
        landing.join(120)
    assert landed_during_fetch, "the landing waited for the writer slot that seed intake held over HTTP"
    assert results == {"intake": True, "landing": True}
    admitted = {r[0] for r in store.query("SELECT url FROM frontier WHERE crawl_id = 'maps'")}
    assert {f"{site.base_url}/page/{n}" for n in range(3)} <= admitted

