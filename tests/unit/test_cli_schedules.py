"""`crawl --every/--cron` and `crawl-platform schedule`: validation (one line, exit 2) and what the
lake's crawl_schedules table holds afterwards, on a real broker and lake."""

from __future__ import annotations

import pytest

from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.submission import build_crawl_request
from tests.unit.test_cli import _cli, _nothing_enqueued, _seed_messages, _stderr_lines


def _schedules(store) -> list[tuple]:
    return store.query("SELECT crawl_id, every_seconds, cron, period_seconds, active FROM crawl_schedules")


@pytest.mark.parametrize(("args", "reason"), [
    (["--every", "6x"], "interval '6x' must be a number and a unit s, m, h, d or w"),
    (["--every", "10s"], "interval '10s' must be between 1m and"),
    (["--cron", "61 * * * *"], "cron schedule '61 * * * *' is not a valid 5-field cron expression"),
    (["--cron", "@hourly"], "cron schedule '@hourly' is not a valid 5-field cron expression"),
    (["--every", "1h", "--cron", "0 * * * *"], "give --every or --cron, not both"),
])
def test_a_bad_schedule_is_one_line_exit_2_and_nothing_enqueued(settings, bus, args, reason):
    done = _cli(settings, "crawl", "http://example.com/", *args)
    assert done.returncode == 2
    (line,) = _stderr_lines(done)
    assert line == f"crawl-platform: {reason}" or line.startswith(f"crawl-platform: {reason}")
    assert _nothing_enqueued(bus)


def test_crawl_every_carries_the_schedule_and_registers_it(settings, bus, store):
    done = _cli(settings, "crawl", "http://127.0.0.1:9/", "--crawl-id", "shop", "--every", "6h")
    assert done.returncode == 0, done.stderr
    (request,) = _seed_messages(bus)
    assert (request.every_seconds, request.cron) == (21600, "")
    assert _schedules(store) == [("shop", 21600, None, 21600, True)]


def test_schedule_sets_changes_and_turns_off_a_crawls_schedule(settings, bus, store):
    Frontier(store, bus).register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="blog"))
    done = _cli(settings, "schedule", "blog", "--cron", "0 */2 * * *")
    assert (done.returncode, done.stdout.strip()) == (0, "crawl blog: recurring, cron '0 */2 * * *'"), done.stderr
    assert _schedules(store) == [("blog", None, "0 */2 * * *", 7200, True)]
    done = _cli(settings, "schedule", "blog@20261130", "--every", "1d")  # a pass names its family
    assert done.stdout.strip() == "crawl blog: recurring, every 86400s"
    assert _schedules(store) == [("blog", 86400, None, 86400, True)]
    done = _cli(settings, "schedule", "blog", "--off")
    assert (done.returncode, done.stdout.strip()) == (0, "crawl blog: no recurring passes")
    assert _schedules(store) == [("blog", 86400, None, 86400, False)]


@pytest.mark.parametrize(("args", "reason"), [
    (["nope", "--every", "1h"], "crawl-platform: no crawl 'nope' (see crawl-platform status)"),
    (["blog", "--every", "soon"], "crawl-platform: interval 'soon' must be a number and a unit s, m, h, d or w"),
    (["blog", "--cron", "* *"], "crawl-platform: cron schedule '* *' is not a valid 5-field cron expression"),
])
def test_schedule_refuses_an_unknown_crawl_or_a_bad_schedule_in_one_line(settings, bus, store, args, reason):
    Frontier(store, bus).register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="blog"))
    done = _cli(settings, "schedule", *args)
    assert done.returncode == 2
    (line,) = _stderr_lines(done)
    assert line.startswith(reason)
    assert _schedules(store) == []
