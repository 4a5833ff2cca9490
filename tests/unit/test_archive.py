"""The raw archive: a batch fetched from a real loopback site lands WARC files that an independent
reader (warcio) opens, holding the exact bodies, status lines and headers; ``pages`` points at each
version's record, the engine's reader reads it back, and ``crawl-platform show`` prints it without
the server seeing a request."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl_platform.archive.reader import archive_folder, archived_responses, read_response
from crawl_platform.archive.writer import archive_results
from crawl_platform.config import Settings
from crawl_platform.lake.backup import backup_lake, restore_lake
from crawl_platform.storage import LocalFolder
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.location import LakeLocation
from tests.sites.hostile import Reply, html_page
from tests.unit.archived import archive_site, cli, dead_url, fetch_and_land, one_line_error, register
from tests.unit.conftest import loopback_fetcher


def _warc_records(root: Path) -> dict[str, list[tuple[str, str | None, object, bytes]]]:
    """Every record of every WARC file under ``root``, read by warcio: (type, target URI, HTTP
    headers, content) in file order, by file."""
    out: dict[str, list[tuple[str, str | None, object, bytes]]] = {}
    for path in sorted(root.rglob("*.warc.gz")):
        with path.open("rb") as file:
            out[str(path.relative_to(root))] = [
                (rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"), rec.http_headers,
                 rec.content_stream().read())
                for rec in ArchiveIterator(file)]
    return out


@pytest.fixture
def landed(hostile, store):
    """A batch of the archive site plus a dead URL, landed for crawl c1."""
    bodies = archive_site(hostile)
    urls = [*bodies, dead_url()]
    register(store, "c1", *urls)
    fetch_and_land(store, "c1", "b1", urls)
    return bodies


def test_warc_files_open_in_warcio_with_the_exact_bodies_and_headers(hostile, store, landed):
    files = _warc_records(store.archive_root)
    assert len(files) == 1  # one shard, one file
    ((name, records),) = files.items()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d/b1-s0-[0-9a-f]{12}\.warc\.gz", name)
    assert records[0][0] == "warcinfo"
    kinds = [r[0] for r in records[1:]]
    assert kinds == ["request", "response"] * len(landed)  # the dead URL has no response: no record
    responses = {uri: (http, body) for kind, uri, http, body in records if kind == "response"}
    assert {uri: body for uri, (_http, body) in responses.items()} == landed
    http, _ = responses[hostile.url("/cookies")]
    assert http.statusline == "200 OK"
    assert [v for k, v in http.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
    assert http.get_header("X-Served-By") == "hostile"
    zipped, _ = responses[hostile.url("/zipped")]  # stored decoded, and its headers say so
    assert zipped.get_header("Content-Encoding") is None
    assert zipped.get_header("X-Crawl-Original-Content-Encoding") == "gzip"
    assert zipped.get_header("Content-Length") == str(len(landed[hostile.url("/zipped")]))
    assert responses[hostile.url("/missing")][0].statusline == "404 Not Found"
    requests = {uri: http for kind, uri, http, _ in records if kind == "request"}
    assert requests[hostile.url("/plain")].protocol == "GET"  # warcio puts the method here
    assert requests[hostile.url("/plain")].get_header("User-Agent") == "crawl-platform-test/1.0"
    assert requests[hostile.url("/plain")].get_header("Host") == hostile.url("").split("//")[1]


def test_pages_point_at_their_records_and_failures_have_none(hostile, store, landed):
    rows = store.query("SELECT url, status, warc_file, warc_offset, warc_length FROM pages")
    assert len(rows) == len(landed) + 1
    for url, status, warc_file, offset, length in rows:
        if status is None:  # the dead URL: no response, no body, no pointer
            assert (warc_file, offset, length) == (None, None, None)
            continue
        headers, body = read_response(store.archive, warc_file, offset, length)
        assert body == landed[url]
        assert ("Content-Length", str(len(body))) in headers
    assert archive_folder(Settings(lake_path=store.location.sqlite_path.parent)) == store.archive


def test_archived_responses_read_the_archive_latest_version_or_all(hostile, store, landed):
    plain = hostile.url("/plain")
    changed = html_page("Plain", text="changed since")
    hostile.static["/plain"] = Reply(200, changed)
    fetch_and_land(store, "c1", "b2", [plain])
    hostile.clear_requests()
    latest = {r.url: r for r in archived_responses(store, "c1")}
    assert hostile.requests == []  # read from the archive, not the site
    assert set(latest) == set(landed)  # the dead URL has no response
    assert (latest[plain].version, latest[plain].body, latest[plain].status) == (2, changed, 200)
    assert latest[hostile.url("/missing")].status == 404
    served = [h for h in latest[hostile.url("/cookies")].headers if h[0] not in ("Server", "Date")]
    assert served == [("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"),
                      ("X-Served-By", "hostile"), ("Content-Length", str(len(latest[hostile.url("/cookies")].body)))]
    versions = sorted((r.version, r.body) for r in archived_responses(store, "c1", [plain], latest_only=False))
    assert versions == [(1, landed[plain]), (2, changed)]
    assert list(archived_responses(store, "other-crawl")) == []


def test_every_hop_of_a_redirect_chain_is_archived_and_the_page_points_at_the_final_response(hostile, store):
    chain, loop = hostile.url("/chain/2"), hostile.url("/loop/a")
    register(store, "c1", chain, loop)
    fetch_and_land(store, "c1", "b1", [chain, loop])
    ((_name, records),) = _warc_records(store.archive_root).items()
    responses = [(uri, http.statusline, body) for kind, uri, http, body in records if kind == "response"]
    requests = [uri for kind, uri, _http, _body in records if kind == "request"]
    final = html_page("End of the chain")
    # In the order they were answered: the two 301s, then the page; then the loop's two 302s, which
    # were fetched although the loop itself failed.
    assert responses == [(chain, "301 Moved Permanently", b"moved"),
                         (hostile.url("/chain/1"), "301 Moved Permanently", b"moved"),
                         (hostile.url("/chain/0"), "200 OK", final),
                         (loop, "302 Found", b""), (hostile.url("/loop/b"), "302 Found", b"")]
    assert requests == [uri for uri, _status, _body in responses]
    rows = {url: (status, file, offset, length, redirects) for url, status, file, offset, length, redirects
            in store.query("SELECT url, status, warc_file, warc_offset, warc_length, redirect_chain FROM pages")}
    status, warc_file, offset, length, redirects = rows[chain]
    assert (status, list(redirects)) == (200, [chain, hostile.url("/chain/1")])
    assert read_response(store.archive, warc_file, offset, length)[1] == final
    assert rows[loop][:4] == (None, None, None, None)  # no final response: no pointer, as before


def test_a_refetched_shard_writes_a_new_file_and_old_pointers_stay_valid(hostile, store, landed):
    """A retried or re-materialised fetch step never overwrites a file that landed rows point into."""
    fetch_and_land(store, "c1", "b1", list(landed))  # the same batch and shard again
    files = sorted(store.archive_root.rglob("*"))
    assert [p.suffix for p in files if p.is_file()] == [".gz", ".gz"]  # two complete files, no .part
    for url, warc_file, offset, length in store.query(
            "SELECT url, warc_file, warc_offset, warc_length FROM pages WHERE status IS NOT NULL"):
        assert read_response(store.archive, warc_file, offset, length)[1] == landed[url]


def test_show_prints_the_stored_response_without_a_request(hostile, store_settings, store, landed):
    url = hostile.url("/cookies")
    hostile.settle()
    hostile.clear_requests()
    done = cli(store_settings, "show", url)
    assert done.returncode == 0, done.stderr
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    assert [h for h in lines if h.startswith("Set-Cookie")] == ["Set-Cookie: a=1", "Set-Cookie: b=2"]
    assert f"Content-Length: {len(landed[url])}" in lines
    assert body == landed[url]
    assert "version 1, crawl c1" in done.stderr.decode()
    assert hostile.requests == []


def test_show_picks_the_version_asked_for(hostile, store_settings, store, landed):
    hostile.static["/plain"] = Reply(200, b"<html><title>v2</title></html>")
    fetch_and_land(store, "c1", "b2", [hostile.url("/plain")])
    first = cli(store_settings, "show", hostile.url("/plain"), "--version", "1")
    latest = cli(store_settings, "show", hostile.url("/plain"), "--crawl-id", "c1")
    assert first.stdout.partition(b"\r\n\r\n")[2] == landed[hostile.url("/plain")]
    assert latest.stdout.partition(b"\r\n\r\n")[2] == b"<html><title>v2</title></html>"


@pytest.mark.parametrize(("args", "message"), [
    (["http://127.0.0.1:9/never-fetched"], "no stored page http://127.0.0.1:9/never-fetched"),
    (["{plain}", "--version", "7"], "no stored page {plain} version 7"),
    (["{plain}", "--crawl-id", "nope"], "no stored page {plain} in crawl nope"),
    (["not a url"], "bad URL: "),
    (["{dead}"], "version 1 has no response: "),
])
def test_show_bad_input_is_one_line_exit_2(hostile, store_settings, store, args, message):
    bodies = archive_site(hostile)
    dead = dead_url()
    fetch_and_land(store, "c1", "b1", [*bodies, dead])
    plain = hostile.url("/plain")
    done = cli(store_settings, "show", *(a.format(plain=plain, dead=dead) for a in args))
    assert done.returncode == 2
    assert message.format(plain=plain, dead=dead) in one_line_error(done)
    assert done.stdout == b""


def test_backup_carries_the_archive_and_restore_brings_it_back(hostile, store, landed, tmp_path):
    manifest = backup_lake(store, tmp_path / "backup")
    (original,) = [p.relative_to(store.archive_root) for p in store.archive_root.rglob("*.warc.gz")]
    assert manifest.archive_files == 1
    assert (tmp_path / "backup" / "archive" / original).read_bytes() == (store.archive_root / original).read_bytes()
    elsewhere = Settings(lake_path=tmp_path / "restored")
    restore_lake(tmp_path / "backup", LakeLocation.from_settings(elsewhere))
    restored = CrawlStore.from_settings(elsewhere)
    assert restored.archive_root == tmp_path / "restored" / "archive"
    bodies = {r.url: r.body for r in archived_responses(restored, "c1")}
    assert bodies == landed


def test_an_archive_that_cannot_be_written_fails_the_fetch_step_and_lands_nothing(hostile, store, tmp_path):
    """The step fails (its retry fetches again) rather than landing rows without their records."""
    bodies = archive_site(hostile)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    store.archive = LocalFolder(blocker / "archive")
    with pytest.raises(OSError, match="Not a directory"):
        fetch_and_land(store, "c1", "b1", list(bodies))
    assert store.query("SELECT count(*) FROM pages") == [(0,)]


def test_a_response_that_cannot_be_archived_is_left_out_and_the_others_are_archived(hostile, tmp_path):
    """A result whose records cannot be made (here a URL no header can hold, a lone surrogate)
    leaves nothing of itself in the file; the others are archived whole, at the right offsets."""
    bodies = archive_site(hostile)
    fetcher = loopback_fetcher()
    results = fetcher.fetch_all(list(bodies))
    fetcher.close()
    good = sorted(results)
    bad = replace(results[good[0]], url="http://h.test/bad", final_url="http://h.test/\ud800")
    pointers, failed = archive_results(LocalFolder(tmp_path), "b1-s0.warc.gz",
                                       [results[good[0]], bad, *(results[u] for u in good[1:])])
    assert list(failed) == ["http://h.test/bad"]
    assert failed["http://h.test/bad"].startswith("UnicodeEncodeError: ")
    assert sorted(pointers) == good
    ((_name, records),) = _warc_records(tmp_path).items()
    assert [(kind, uri) for kind, uri, _http, _body in records[1:]] == [
        (kind, url) for url in good for kind in ("request", "response")]
    for url in good:
        pointer = pointers[url]
        assert read_response(LocalFolder(tmp_path), pointer.warc_file, pointer.offset, pointer.length)[1] == bodies[url]

