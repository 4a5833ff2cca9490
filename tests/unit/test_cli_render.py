"""``crawl --render`` on the command line: submitted with the request and registered with the crawl,
or refused in one line (exit 2, nothing enqueued) when the platform cannot or may not render."""

from __future__ import annotations

import pytest

from tests.conftest import requires_browser
from tests.unit.test_cli import _cli, _nothing_enqueued, _seed_messages, _stderr_lines


@pytest.mark.parametrize(("args", "env", "line"), [
    (["--render", "always"], {"CRAWL_BROWSER_PATH": "/nonexistent/chromium"},
     "crawl-platform: rendering needs a browser (CRAWL_BROWSER_PATH '/nonexistent/chromium' is not an executable): "
     "install Chromium (Debian: apt-get install chromium) or set CRAWL_BROWSER_PATH"),
    (["--render", "auto"], {"CRAWL_RENDER_ALLOWED": "false"},
     "crawl-platform: render auto: this platform does not render pages (CRAWL_RENDER_ALLOWED=false)"),
    (["--screenshots"], {},
     "crawl-platform: screenshots are of rendered pages: give --render always or auto too"),
])
def test_rendering_the_platform_cannot_do_is_one_line_and_nothing_enqueued(settings, bus, args, env, line):
    done = _cli(settings, "crawl", "http://127.0.0.1:9/", *args, env=env)
    assert (done.returncode, done.stdout, _stderr_lines(done)) == (2, "", [line])
    assert _nothing_enqueued(bus)


@requires_browser
def test_a_crawl_that_renders_carries_its_mode_to_the_topic_and_the_lake(settings, bus, store):
    done = _cli(settings, "crawl", "http://127.0.0.1:9/", "--crawl-id", "spa", "--render", "auto", "--screenshots")
    assert done.returncode == 0, done.stderr
    (request,) = _seed_messages(bus)
    assert (request.render, request.screenshots) == ("auto", True)
    assert store.query("SELECT render, screenshots FROM crawls WHERE crawl_id = 'spa'") == [("auto", True)]
    # The same id with another render mode is another crawl: refused.
    again = _cli(settings, "crawl", "http://127.0.0.1:9/", "--crawl-id", "spa", "--render", "always", "--screenshots")
    assert again.returncode == 2
    assert "registered already with other render" in again.stderr


@pytest.mark.parametrize(("content", "reason"), [
    (None, "cannot read it: No such file or directory"),
    ("not a certificate\n", "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
])
def test_a_ca_file_that_is_not_one_is_one_line_exit_2(settings, tmp_path, content, reason):
    path = tmp_path / "ca.pem"
    if content is not None:
        path.write_text(content)
    done = _cli(settings, "status", env={"CRAWL_TLS_CA_FILE": str(path)})
    assert (done.returncode, _stderr_lines(done)) == (
        2, [f"crawl-platform: invalid setting CRAWL_TLS_CA_FILE={str(path)!r}: Value error, {reason}"])
