"""Rendering asked for from the Dagster Launchpad: on the embedded stack with its webserver, the
``submit_crawl_job`` is launched through the webserver's GraphQL API (Dagster's own Python client,
as the Launchpad's Launch button does) with ``render: auto`` and extraction rules, and the
single-page app's pages land rendered, with the links and fields only its script writes. Needs
Debian's ``chromium`` (``.ci/run`` installs it)."""

import time

import pytest
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from crawl_platform.cli.crawls import wait_for_crawl
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.store.database import CrawlStore
from tests.conftest import requires_browser
from tests.e2e.conftest import cli
from tests.sites.spa import RULES, SpaSite

pytestmark = [pytest.mark.e2e(seconds=70), requires_browser]

FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def _launch(client: DagsterGraphQLClient, config: dict[str, object]) -> DagsterRunStatus:
    """Launch the Launchpad's crawl job with ``config``; the run's status once it ended."""
    run_id = client.submit_job_execution("submit_crawl_job", run_config={
        "ops": {"submit_crawl_request": {"config": config}}})
    deadline = time.monotonic() + 120
    while (status := client.get_run_status(run_id)) not in FINISHED and time.monotonic() < deadline:
        time.sleep(0.5)
    return status


def test_a_crawl_launched_from_the_launchpad_renders_the_single_page_app(start_platform):
    settings, env, dagster = start_platform(host_delay_ms=0, webserver=True, with_processes=True)
    client = DagsterGraphQLClient("127.0.0.1", port_number=dagster.webserver_port, timeout=60)
    with SpaSite(products=3) as spa:
        status = _launch(client, {"seeds": [spa.base_url + "/"], "crawl_id": "spa-launchpad", "render": "auto",
                                  "extract_rules": RULES})
        assert status == DagsterRunStatus.SUCCESS
        store = CrawlStore.from_settings(settings)
        assert wait_for_crawl(FrontierReadModel(store), "spa-launchpad", timeout_s=240) == 0

    pages = dict(store.query("SELECT url, rendered FROM pages WHERE crawl_id = 'spa-launchpad'"))
    assert pages == dict.fromkeys(spa.pages, True)  # the products, which only the script links to
    reasons = dict(store.query("SELECT url, render_reason FROM pages WHERE crawl_id = 'spa-launchpad'"))
    assert reasons[spa.base_url + "/"].startswith("auto: app shell")
    links = store.query("SELECT DISTINCT dst_url FROM links WHERE src_url = ?", [spa.base_url + "/"])
    assert {url for (url,) in links} == {f"{spa.base_url}/product/{n}" for n in (1, 2, 3)}
    done = cli(env, "extract", "spa-launchpad")
    assert done.returncode == 0, done.stderr
    records = store.query("SELECT json_extract_string(fields, '$.name'), json_extract(fields, '$.price')::DOUBLE "
                          "FROM records WHERE crawl_id = 'spa-launchpad' ORDER BY 2")
    assert records == [(f"Product {n}", n * 10 + 0.5) for n in (1, 2, 3)]

