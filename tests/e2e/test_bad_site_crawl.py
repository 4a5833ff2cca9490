"""A site with bad pages beside ordinary ones (tests.sites.bad_pages), crawled as a user runs the
platform: the CLI, the Dagster daemon's sensors and runs, the real broker and lake. Every page lands,
fetched once, each bad one with what went wrong on its row; no run fails and the crawl ends."""

import pytest
from dagster import DagsterInstance, DagsterRunStatus

from crawl_platform.store.database import CrawlStore
from tests.e2e.conftest import cli
from tests.sites.bad_pages import assert_crawled, serve_bad_pages
from tests.sites.hostile import HostileSite

pytestmark = pytest.mark.e2e(seconds=60)


@pytest.mark.timeout(600)
def test_bad_pages_never_stop_a_crawl_through_dagster_and_each_page_is_fetched_once(start_platform):
    settings, env = start_platform(host_delay_ms=0)
    with HostileSite(lifetime_s=500) as site:
        pages = serve_bad_pages(site)
        done = cli(env, "crawl", site.url("/"), "--crawl-id", "bad", "--max-depth", "3", "--wait", "--timeout", "300")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "crawl bad: done, pending 0" in done.stdout
        assert_crawled(CrawlStore.from_settings(settings), pages, site, "bad")
    with DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        runs = instance.get_runs()
        assert runs
        assert [r.run_id for r in runs if r.status == DagsterRunStatus.FAILURE] == []
