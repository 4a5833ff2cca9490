"""The ``crawl-platform`` command line (crawl_platform.cli.main), run as a real subprocess.

Its contract: a user mistake prints one line to stderr and exits 2, an unreachable broker or busy
store prints one line and exits 1, never a traceback; nothing is enqueued when any seed is bad.
Output goes to a pipe here, as it does under CI or another tool.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import CrawlRequest, decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.cli.crawls import wait_for_crawl
from crawl_platform.cli.main import main
from crawl_platform.config import Settings
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.control import build_control
from crawl_platform.pipeline.submission import build_crawl_request
from crawl_platform.store.database import CrawlStore


def _cli(settings: Settings, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return _python(settings, "-m", "crawl_platform.cli.main", *args, env=env, cwd=cwd, timeout=timeout)


def _python(settings: Settings, *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python *argv`` with the settings in its environment, as the CLI runs."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, *argv],
        env={**base, **settings.to_env(), **(env or {})},
        cwd=cwd or settings.lake_path.parent,
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def _stderr_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def _seed_messages(bus: KafkaBus) -> list[CrawlRequest]:
    out = []
    for part, (low, high) in bus.watermarks(bus.seeds_topic).items():
        if high > low:
            out += [decode_crawl_request(r.value)
                    for r in bus.read_range(bus.seeds_topic, OffsetRange(part, low, high))]
    return out


def _nothing_enqueued(bus: KafkaBus) -> bool:
    return all(high == 0 for _, high in bus.watermarks(bus.seeds_topic).values())


@pytest.mark.parametrize("seed", ["ftp://x", "not a url", "http://example.com:99999/", "http://"])
def test_bad_seed_is_one_line_exit_2_and_nothing_enqueued(settings, bus, seed):
    done = _cli(settings, "crawl", seed)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    (line,) = _stderr_lines(done)
    assert line.startswith("crawl-platform: bad seed: ")
    assert repr(seed) in line
    assert _nothing_enqueued(bus)


def test_one_bad_seed_among_good_ones_enqueues_nothing(settings, bus):
    done = _cli(settings, "crawl", "http://example.com/", "ftp://x", "http://example.org/")
    assert done.returncode == 2
    assert len(_stderr_lines(done)) == 1
    assert "'ftp://x'" in done.stderr
    assert _nothing_enqueued(bus)


@pytest.mark.parametrize(("flag", "value", "reason"),
                         [("--max-pages", "0", "max-pages must be between 1 and"),
                          ("--max-depth", "-1", "max-depth must be between 0 and"),
                          ("--allow", "(", "pattern '(' is not a valid RE2 regular expression: missing ): ("),
                          ("--deny", "/(?!x)", "pattern '/(?!x)' is not a valid RE2 regular expression"),
                          ("--max-pages-per-host", "-3", "max-pages-per-host must be between 0 and")])
def test_bad_limits_are_one_line_exit_2(settings, bus, flag, value, reason):
    done = _cli(settings, "crawl", "http://example.com/", flag, value)
    assert done.returncode == 2
    (line,) = _stderr_lines(done)
    assert reason in line
    assert _nothing_enqueued(bus)


def test_bad_scope_is_exit_2_without_traceback(settings, bus):
    done = _cli(settings, "crawl", "http://example.com/", "--scope", "planet")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "invalid choice: 'planet'" in _stderr_lines(done)[-1]
    assert _nothing_enqueued(bus)


@pytest.mark.parametrize(("crawl_id", "reason"), [
    ("a...b", "crawl-platform: crawl id 'a...b' must be 1-128 letters, digits, '.', '_' or '-', starting with "
              "a letter or digit, without '..'; '@' only in the passes of recurring crawls (<id>@<stamp>)"),
    ("victim@x", "crawl-platform: crawl id 'victim@x': '@' is reserved for the passes of recurring crawls"),
    ("a/b", "crawl-platform: crawl id 'a/b' must be 1-128 letters"),
])
def test_a_crawl_id_outside_the_pattern_is_one_line_exit_2(settings, bus, crawl_id, reason):
    done = _cli(settings, "crawl", "http://example.com/", "--crawl-id", crawl_id)
    assert done.returncode == 2
    (line,) = _stderr_lines(done)
    assert line.startswith(reason)
    assert _nothing_enqueued(bus)


def test_a_known_crawl_id_with_other_seeds_is_one_line_exit_2_and_nothing_enqueued(settings, store, bus):
    Frontier(store, bus).register(build_crawl_request(["http://example.com/"], crawl_id="known"))
    done = _cli(settings, "crawl", "http://example.com/", "http://example.org/", "--crawl-id", "known")
    assert done.returncode == 2
    assert _stderr_lines(done) == [
        "crawl-platform: crawl known is registered already with other seeds: submit it under a new id"]
    assert _nothing_enqueued(bus)
    again = _cli(settings, "crawl", "http://example.com/", "--crawl-id", "known")  # the same: fine
    assert again.returncode == 0, again.stderr


def test_good_seed_enqueues_one_crawl_request_with_its_limits(settings, bus):
    before = time.time()
    done = _cli(settings, "crawl", "HTTP://Example.com:80/a#frag", "--crawl-id", "c-1", "--max-pages", "7",
                "--max-depth", "2", "--scope", "domain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "submitted crawl c-1 (1 seeds)"
    assert done.stderr == ""
    (request,) = _seed_messages(bus)
    assert request.crawl_id == "c-1"
    assert request.seeds == ("http://example.com/a",)
    assert (request.max_pages, request.max_depth, request.scope) == (7, 2, "domain")
    assert before <= request.submitted_at <= time.time()
    # Registered at once (the intake run of the message then adds nothing): its seed is already
    # on the frontier topic, acknowledged by the broker.
    store = CrawlStore.from_settings(settings)
    assert store.query("SELECT crawl_id, max_pages FROM crawls") == [("c-1", 7)]
    assert store.query("SELECT url, depth, state FROM frontier") == [("http://example.com/a", 0, "queued")]


_REPORT_PANDAS = ("import sys; from crawl_platform.cli.main import main; code = main(sys.argv[1:]); "
                  "print('pandas imported:', 'pandas' in sys.modules); "
                  "print('pyarrow imported:', 'pyarrow' in sys.modules); sys.exit(code)")


def test_crawl_and_status_register_and_read_the_lake_without_importing_pandas(settings, bus):
    """DuckDB and pyarrow import pandas at a process's first parameter or array, only to recognise
    pandas values: these commands run as if it were not installed, and still write and read. They
    bind their few rows as lists (crawl_platform/store/bind.py), so pyarrow is not imported either."""
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _python(settings, "-c", _REPORT_PANDAS, *args)

    crawl = cli("crawl", "http://example.com/p", "--crawl-id", "lean", "--max-pages", "5")
    assert crawl.returncode == 0, crawl.stderr
    assert crawl.stdout.splitlines() == ["submitted crawl lean (1 seeds)", "pandas imported: False",
                                         "pyarrow imported: False"]
    status = cli("status", "--crawl-id", "lean")
    assert status.returncode == 0, status.stderr
    (row,) = [line for line in status.stdout.splitlines() if "lean" in line]
    assert row.split("│")[2].strip() == "1"  # pending
    assert status.stdout.splitlines()[-2:] == ["pandas imported: False", "pyarrow imported: False"]
    store = CrawlStore.from_settings(settings)
    assert store.query("SELECT crawl_id, max_pages FROM crawls") == [("lean", 5)]
    # Once the command is over, pandas imports as usual (main() called by another program).
    after = _python(settings, "-c", "from crawl_platform.cli.main import main; main(['status']); "
                    "import pandas; print(pandas.DataFrame({'n': [1]}).shape)")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[-1] == "(1, 1)"


def test_scope_flags_travel_with_the_request(settings, bus):
    done = _cli(settings, "crawl", "http://example.com/", "--crawl-id", "flags", "--allow", "/shop/",
                "--allow", "/blog/", "--deny", r"\.pdf$", "--max-pages-per-host", "9",
                "--user-agent", "ShopBot/1", "--sitemaps")
    assert done.returncode == 0, done.stderr
    (request,) = _seed_messages(bus)
    assert request.allow_patterns == ("/shop/", "/blog/")
    assert request.deny_patterns == (r"\.pdf$",)
    assert (request.max_pages_per_host, request.user_agent, request.use_sitemaps) == (9, "ShopBot/1", True)
    # A sitemap crawl is left to the intake run, which fetches the sitemaps as it registers it.
    assert "the seeds sensor registers it (it reads sitemaps, which the intake run fetches)" in done.stdout
    assert not CrawlStore.from_settings(settings).exists()


def test_defaults_come_from_settings_and_the_crawl_id_from_the_first_seed(settings, bus):
    done = _cli(settings, "crawl", "http://example.com:8080/", "http://example.com:8080/",
                env={"CRAWL_DEFAULT_MAX_PAGES": "33", "CRAWL_DEFAULT_SCOPE": "any"})
    assert done.returncode == 0, done.stderr
    (request,) = _seed_messages(bus)
    assert request.crawl_id.startswith("example.com_8080-")
    assert request.seeds == ("http://example.com:8080/",)  # duplicates collapse
    assert (request.max_pages, request.scope) == (33, "any")
    assert request.crawl_id in done.stdout


@pytest.fixture(scope="module")
def unreachable_run(tmp_path_factory) -> subprocess.CompletedProcess[str]:
    """``crawl`` against a closed port on loopback: run once, several tests read the outcome."""
    tmp = tmp_path_factory.mktemp("cli-unreachable")
    settings = Settings(kafka_bootstrap_servers=f"127.0.0.1:{free_port()}", lake_path=tmp / "lake",
                        dagster_home=tmp / "dagster_home")
    return _cli(settings, "crawl", "http://example.com/", cwd=tmp, timeout=90)


def test_unreachable_broker_is_exit_1_without_traceback(unreachable_run):
    assert unreachable_run.returncode == 1
    assert "Traceback" not in unreachable_run.stderr
    assert "crawl-platform: cannot reach Kafka at 127.0.0.1:" in unreachable_run.stderr
    assert unreachable_run.stdout == ""


def test_unreachable_broker_prints_exactly_one_line(unreachable_run):
    assert len(_stderr_lines(unreachable_run)) == 1, unreachable_run.stderr[-500:]


@pytest.mark.parametrize("seed", ["ftp://x/[/]", "ftp://x/[bold]y"])
def test_bad_seed_with_brackets_is_echoed_verbatim(settings, seed):
    done = _cli(settings, "crawl", seed)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert repr(seed) in done.stderr


@pytest.mark.parametrize("args", [["ftp://example.com/" + "a" * 100],
                                  ["http://example.com/", "--crawl-id", "has space"]])
def test_long_error_is_still_one_line(settings, args):
    done = _cli(settings, "crawl", *args)
    assert done.returncode == 2
    assert len(_stderr_lines(done)) == 1, done.stderr


def test_invalid_setting_is_one_line_exit_2(settings):
    done = _cli(settings, "status", env={"CRAWL_TOPIC_PARTITIONS": "zero"})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = _stderr_lines(done)
    assert line.startswith("crawl-platform: invalid setting")


def test_invalid_setting_names_the_setting(settings):
    done = _cli(settings, "status", env={"CRAWL_TOPIC_PARTITIONS": "zero"})
    assert "CRAWL_TOPIC_PARTITIONS" in done.stderr or "topic_partitions" in done.stderr


def test_status_without_a_database_says_no_crawls_yet(settings):
    done = _cli(settings, "status")
    assert done.returncode == 0
    assert done.stdout.startswith("no crawls yet")
    assert done.stderr == ""
    assert not settings.lake_path.exists()  # looking does not create it


def test_status_shows_a_registered_crawl(settings, store, bus):
    seeds = ("http://a.example/", "http://a.example/2")
    Frontier(store, bus).register(CrawlRequest("status-check-1", seeds, 10, 1, "host", time.time()))
    done = _cli(settings, "status")
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if "status-check-1" in line]
    assert row.split("│")[2].strip() == "2"  # pending


def test_status_with_an_unreachable_broker_answers_from_the_store(settings, store, bus):
    Frontier(store, bus).register(CrawlRequest("no-broker", ("http://a.example/",), 10, 1, "host", time.time()))
    done = _cli(settings, "status", "--crawl-id", "no-broker",
                env={"KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    (row,) = [line for line in done.stdout.splitlines() if "no-broker" in line]
    assert row.split("│")[2].strip() == "1"  # pending


def test_status_and_wait_build_no_kafka_client(crawl_env, store, bus, monkeypatch, capsys):
    Frontier(store, bus).register(CrawlRequest("no-client", ("http://a.example/",), 10, 0, "host", time.time()))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")

    def no_kafka(*args, **kwargs):
        raise AssertionError("a read-only command built a Kafka client")

    monkeypatch.setattr(KafkaBus, "__init__", no_kafka)
    started = time.monotonic()
    assert main(["status", "--crawl-id", "no-client"]) == 0
    assert time.monotonic() - started < bus.timeout_s / 2  # at once, not after a Kafka timeout
    assert wait_for_crawl(FrontierReadModel(store), "no-client", timeout_s=0.01, poll_s=0.01) == 1
    out = capsys.readouterr()
    assert "no-client" in out.out
    assert "crawl no-client: running, pending 1" in out.out
    assert "crawl no-client: still pending after 0s" in out.err


def test_wait_reports_the_end_of_a_nearly_done_crawl_at_its_commit_not_a_poll_later(crawl_env, store, bus, capsys):
    """With few URLs pending, ``crawl --wait`` watches the lake's snapshot: the commit that ends
    the crawl (here, its cancellation) is reported within a fraction of the status interval."""
    frontier = Frontier(store, bus)
    frontier.register(CrawlRequest("ending", ("http://a.example/",), 10, 0, "host", time.time()))
    ended: list[float] = []

    def end_it() -> None:
        time.sleep(1.0)
        frontier.control(build_control("ending", "cancel"))
        ended.append(time.monotonic())

    ender = threading.Thread(target=end_it)
    ender.start()
    try:
        assert wait_for_crawl(FrontierReadModel(store), "ending", timeout_s=120, poll_s=60) == 0
        returned = time.monotonic()
    finally:
        ender.join()
    assert returned - ended[0] < 10  # a 60 s status interval, answered at the commit
    assert "crawl ending: cancelled" in capsys.readouterr().out


def test_the_embedded_catalog_files_change_at_a_commit_and_not_at_a_read(store, bus):
    """What ``crawl --wait`` watches instead of querying the lake five times a second."""
    frontier = Frontier(store, bus)
    frontier.register(CrawlRequest("first", ("http://a.example/",), 10, 0, "host", time.time()))
    before = store.location.catalog_files_state()
    assert before is not None
    FrontierReadModel(store).status()
    store.snapshot_id()
    assert store.location.catalog_files_state() == before
    frontier.register(CrawlRequest("second", ("http://b.example/",), 10, 0, "host", time.time()))
    assert store.location.catalog_files_state() != before


def test_status_of_an_unknown_crawl_is_exit_2(settings, store):
    done = _cli(settings, "status", "--crawl-id", "nope")
    assert done.returncode == 2
    assert "no crawl 'nope'" in done.stdout


def test_the_command_line_imports_the_archive_only_for_its_own_commands():
    """``crawl``, ``status`` and the rest start without the archive's modules (FastWARC, and
    ``requests`` through the WARC writer): about 0.1 CPU s a start; ``show`` and ``export`` import them."""
    archive_modules = ("crawl_platform.archive.export", "crawl_platform.archive.reader",
                       "crawl_platform.archive.writer", "fastwarc", "requests")
    code = ("import sys, crawl_platform.cli.main as m; "
            f"print(sorted(set({archive_modules!r}) & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
