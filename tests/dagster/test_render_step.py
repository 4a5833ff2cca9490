"""Rendering through Dagster: the Launchpad job's ``render`` option and its one-line refusals, and a
batch partition whose ``render_shard`` step renders a single-page app's pages (real broker, lake,
site and Chromium)."""

import pytest

from crawl_platform.bus.messages import decode_crawl_request
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform_dagster.assets.intake import submit_crawl_job
from tests.conftest import requires_browser
from tests.dagster.conftest import RESOURCES, crawl_first_batch, topic_ranges
from tests.sites.spa import SpaSite


def _submit(render: str):
    config = {"ops": {"submit_crawl_request": {"config": {
        "seeds": ["http://127.0.0.1:9/"], "crawl_id": f"launchpad-{render}", "render": render}}}}
    return submit_crawl_job.execute_in_process(run_config=config, resources=RESOURCES, raise_on_error=False)


@requires_browser
def test_the_launchpad_submits_a_crawl_that_renders(crawl_env, bus):
    assert _submit("auto").success
    (r,) = topic_ranges(bus, crawl_env.seeds_topic)
    (record,) = bus.read_range(crawl_env.seeds_topic, r)
    assert decode_crawl_request(record.value).render == "auto"


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("CRAWL_BROWSER_PATH", "/nonexistent/chromium",
     "bad crawl request: rendering needs a browser (CRAWL_BROWSER_PATH '/nonexistent/chromium' is not an "
     "executable): install Chromium (Debian: apt-get install chromium) or set CRAWL_BROWSER_PATH"),
    ("CRAWL_RENDER_ALLOWED", "false",
     "bad crawl request: render always: this platform does not render pages (CRAWL_RENDER_ALLOWED=false)"),
])
def test_the_launchpad_refuses_rendering_in_one_line_and_enqueues_nothing(crawl_env, bus, monkeypatch,
                                                                         variable, value, message):
    monkeypatch.setenv(variable, value)
    result = _submit("always")
    assert not result.success
    assert result.get_step_failure_events()[0].step_failure_data.error.message.strip().endswith(f"Failure: {message}")
    assert all(hi == 0 for _lo, hi in bus.watermarks(crawl_env.seeds_topic).values())


@requires_browser
def test_a_batch_partition_renders_its_pages_in_the_render_step(crawl_env, bus, store, instance):
    with SpaSite(products=3) as spa:
        _key, result = crawl_first_batch(instance, bus, crawl_env, build_crawl_request(
            [spa.base_url + "/"], crawl_id="spa", max_depth=1, render="always"))
    assert result.success
    steps = {e.step_key for e in result.all_events if e.step_key}
    assert any(step.startswith("crawl_batch.render_shard") for step in steps)
    meta = next(m for m in result.get_asset_materialization_events()
                if m.asset_key.to_user_string() == "pages").materialization.metadata
    assert meta["pages_rendered"].value == 1
    assert store.query("SELECT url, rendered, render_reason FROM pages") == [(spa.base_url + "/", True, "always")]
    # The rendered home page's links went onto the frontier: the products the script listed.
    admitted = {r[0] for r in store.query("SELECT url FROM frontier WHERE crawl_id = 'spa'")}
    assert admitted == {spa.base_url + "/", *(f"{spa.base_url}/product/{n}" for n in (1, 2, 3))}
