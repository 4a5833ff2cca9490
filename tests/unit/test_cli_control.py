"""``crawl-platform cancel|pause|resume`` and the policy flags of ``crawl``, run as a user runs them (a
subprocess on the real broker and lake): outcomes, repeats, unknown ids, the control message, status."""

from __future__ import annotations

import time

from crawl_platform.bus.messages import CrawlRequest, decode_crawl_control, decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.frontier.frontier import Frontier
from tests.unit.crawl_rows import frontier_rows
from tests.unit.test_cli import _cli


def _topic(bus, topic: str) -> list[bytes]:
    return [r.value for p, (lo, hi) in bus.watermarks(topic).items() if hi > lo
            for r in bus.read_range(topic, OffsetRange(p, lo, hi))]


def _state_column(stdout: str, crawl_id: str) -> str:
    (row,) = [line for line in stdout.splitlines() if crawl_id in line]
    return row.split("│")[8].strip()


def test_pause_resume_cancel_from_the_command_line_repeated_and_unknown(settings, store, bus):
    Frontier(store, bus).register(CrawlRequest("cli-ctl", ("http://a.example/",), 10, 1, "host", time.time()))
    steps = [
        (("pause", "cli-ctl"), 0, "crawl cli-ctl paused: 1 pending URLs kept, none fetched until resume"),
        (("pause", "cli-ctl"), 0, "crawl cli-ctl is already paused"),
        (("resume", "cli-ctl"), 0, "crawl cli-ctl resumed: 1 URLs published again"),
        (("cancel", "cli-ctl"), 0, "crawl cli-ctl cancelled: 1 unfetched URLs dropped"),
        (("cancel", "cli-ctl"), 0, "crawl cli-ctl is already cancelled"),
    ]
    for args, code, line in steps:
        done = _cli(settings, *args)
        assert (done.returncode, done.stdout.strip(), done.stderr) == (code, line, ""), args
    refused = _cli(settings, "resume", "cli-ctl")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        2, "", "crawl-platform: crawl cli-ctl is cancelled: it cannot be resumed\n")
    unknown = _cli(settings, "pause", "no-such-crawl")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (2, "", "crawl-platform: no crawl 'no-such-crawl'\n")
    # Every applied command also went out on the control topic, for the control sensor and others.
    commands = [decode_crawl_control(v) for v in _topic(bus, settings.control_topic)]
    assert [(c.crawl_id, c.action) for c in commands] == [("cli-ctl", a) for a in
                                                          ("pause", "pause", "resume", "cancel", "cancel")]
    assert frontier_rows(store, "cli-ctl") == {"http://a.example/": (0, "cancelled")}
    status = _cli(settings, "status")
    assert _state_column(status.stdout, "cli-ctl") == "cancelled"


def test_crawl_takes_its_policies_and_says_what_the_platform_limits_changed(settings, store, bus):
    done = _cli(settings, "crawl", "http://127.0.0.1:9/", "--crawl-id", "polite", "--host-delay-ms", "20",
                "--host-concurrency", "9", "--priority", "50",
                env={"CRAWL_MIN_HOST_DELAY_MS": "200", "CRAWL_MAX_REQUESTS_PER_HOST": "2", "CRAWL_MAX_PRIORITY": "7"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:4] == [
        "note: host delay 20 ms raised to CRAWL_MIN_HOST_DELAY_MS 200 ms (the platform's limit)",
        "note: host concurrency 9 cut to CRAWL_MAX_REQUESTS_PER_HOST 2 (the platform's limit)",
        "note: priority 50 cut to CRAWL_MAX_PRIORITY 7 (the platform's limit)",
    ]
    (request,) = [decode_crawl_request(v) for v in _topic(bus, settings.seeds_topic)]
    assert (request.host_delay_ms, request.host_concurrency, request.priority) == (20, 9, 50)
    assert store.query("SELECT host_delay_ms, host_concurrency, priority, state FROM crawls WHERE crawl_id = 'polite'"
                       ) == [(20, 9, 50, "active")]
    bad = _cli(settings, "crawl", "http://127.0.0.1:9/", "--host-concurrency", "65")
    assert (bad.returncode, bad.stderr) == (2, "crawl-platform: host-concurrency must be between 0 and 64, not 65\n")
