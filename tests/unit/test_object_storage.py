"""The lake, the raw archive and backups on object storage: a real S3 server on loopback
(``rclone serve s3``), over plain HTTP and over TLS with a certificate of the test's own CA.

A lake whose data path is ``s3://`` writes its Parquet files there and reads them back, time
travel included; a batch fetched and landed the way a batch run does puts its WARC file in the
bucket beside the lake, and every record in it is readable through the engine's reader, ``show``,
extraction and a WARC export; a backup goes to the bucket and comes back from it, archive included;
maintenance merges the lake's small files there.
"""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawl_platform.archive.reader import archived_responses
from crawl_platform.config import Settings
from crawl_platform.extract.records import set_rules
from crawl_platform.extract.rules import parse_rules
from crawl_platform.extract.run import extract_crawl
from crawl_platform.lake.backup import Manifest, backup_lake, restore_lake
from crawl_platform.storage import S3Folder, open_folder
from crawl_platform.store.database import CrawlStore, StoreUnavailableError
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.maintenance import maintain_lake
from crawl_platform.store.transfer import table_fingerprints
from tests.sites.object_store import S3Server
from tests.unit.archived import archive_site, cli, dead_url, fetch_and_land, register

TITLES = parse_rules("fields:\n  title:\n    selector: 'css:title'\n")


@pytest.fixture
def s3_settings(s3: S3Server, store_settings: Settings) -> Settings:
    """The test's settings with the lake's Parquet files in a new bucket (``lake/``) and the
    archive beside them (its default, ``archive/``); the catalog stays an embedded SQLite file."""
    bucket = s3.new_bucket()
    return s3.settings(store_settings).model_copy(update={"lake_data_path": f"s3://{bucket}/lake/"})


def _bucket(settings: Settings) -> str:
    return settings.lake_data_path.split("/")[2]


def test_a_lake_on_object_storage_writes_reads_and_travels_in_time(s3: S3Server, s3_settings: Settings) -> None:
    store = CrawlStore.from_settings(s3_settings)
    with store.write() as con:
        con.execute("CREATE TABLE probe AS SELECT range AS i, 'row ' || range AS label FROM range(5000)")
    first = store.last_snapshot_id
    with store.write() as con:
        con.execute("INSERT INTO probe SELECT range, 'more' FROM range(5000, 8000)")
        con.execute("DELETE FROM probe WHERE i < 100")
    assert store.query("SELECT count(*), min(i), max(i) FROM probe") == [(7900, 100, 7999)]
    assert store.query(f"SELECT count(*), max(i) FROM probe AT (VERSION => {first})") == [(5000, 4999)]
    files = s3.bucket_files(_bucket(s3_settings))
    assert [f for f in files if f.startswith("lake/main/probe/") and f.endswith(".parquet")]
    assert not [f for f in files if not f.startswith("lake/")]
    assert not list((s3_settings.lake_path / "data").rglob("*.parquet"))  # nothing local


def test_a_crawl_archives_to_object_storage_and_every_record_reads_back(
        s3: S3Server, s3_settings: Settings, hostile: object, tmp_path: Path) -> None:
    store = CrawlStore.from_settings(s3_settings)
    assert isinstance(store.archive, S3Folder)
    assert store.archive.url == f"s3://{_bucket(s3_settings)}/archive/"
    bodies = archive_site(hostile)  # type: ignore[arg-type]
    urls = [*bodies, dead_url()]
    register(store, "c1", *urls)
    fetch_and_land(store, "c1", "b1", urls)

    (warc,) = [f for f in s3.bucket_files(_bucket(s3_settings)) if f.endswith(".warc.gz")]
    assert warc.startswith("archive/")
    # An independent reader (warcio) on the file as the server stored it.
    stored = (s3.root / _bucket(s3_settings) / warc).read_bytes()
    responses = {r.rec_headers.get_header("WARC-Target-URI"): r.content_stream().read()
                 for r in ArchiveIterator(io.BytesIO(stored)) if r.rec_type == "response"}
    assert responses == bodies
    assert {r.url: r.body for r in archived_responses(store, "c1")} == bodies

    for url, body in bodies.items():  # `show` reads each record with one ranged GET
        done = cli(s3_settings, "show", url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith(b"\r\n\r\n" + body)

    set_rules(store, "c1", TITLES)
    report = extract_crawl(store, "c1")
    # Every HTML page read from the bucket; the 404 is an error of its own, not the archive's.
    assert (report.pages, report.records, report.page_errors) == (4, 3, 1)
    assert not [e for e in report.examples if "archive" in e]

    done = cli(s3_settings, "export", "c1", "--format", "warc", "--to", str(tmp_path / "export"))
    assert done.returncode == 0, done.stderr
    exported = {}
    for path in (tmp_path / "export").glob("*.warc.gz"):
        with path.open("rb") as file:
            exported.update({r.rec_headers.get_header("WARC-Target-URI"): r.content_stream().read()
                             for r in ArchiveIterator(file) if r.rec_type == "response"})
    assert exported == bodies


def test_backup_to_and_restore_from_object_storage(s3: S3Server, s3_settings: Settings, hostile: object,
                                                   tmp_path: Path) -> None:
    store = CrawlStore.from_settings(s3_settings)
    bodies = archive_site(hostile)  # type: ignore[arg-type]
    register(store, "c1", *bodies)
    fetch_and_land(store, "c1", "b1", list(bodies))
    backups = s3.new_bucket()
    dest = open_folder(f"s3://{backups}/nightly/one", s3.object_store)

    manifest = backup_lake(store, dest)
    files = s3.bucket_files(backups)
    assert "nightly/one/backup.json" in files
    assert "nightly/one/catalog.sqlite" in files
    assert [f for f in files if f.startswith("nightly/one/archive/") and f.endswith(".warc.gz")]
    assert Manifest.read(dest) == manifest
    with store.read() as con:
        assert manifest.tables == table_fingerprints(con)

    # Into a new embedded lake with a local archive: tables checked, WARC files copied down.
    elsewhere = Settings(lake_path=tmp_path / "restored")
    restore_lake(dest, LakeLocation.from_settings(elsewhere), archive=CrawlStore.from_settings(elsewhere).archive)
    restored = CrawlStore.from_settings(elsewhere)
    with restored.read() as con:
        assert table_fingerprints(con) == manifest.tables
    assert {r.url: r.body for r in archived_responses(restored, "c1")} == bodies
    assert list(restored.archive_root.rglob("*.warc.gz"))

    # Into a lake whose data path is in another bucket, with the archive beside it there.
    data = s3.new_bucket()
    into_bucket = s3.settings(Settings(lake_path=tmp_path / "restored-s3", lake_data_path=f"s3://{data}/lake/"))
    restore_lake(dest, LakeLocation.from_settings(into_bucket), archive=CrawlStore.from_settings(into_bucket).archive)
    in_bucket = CrawlStore.from_settings(into_bucket)
    with in_bucket.read() as con:
        assert table_fingerprints(con) == manifest.tables
    assert {r.url: r.body for r in archived_responses(in_bucket, "c1")} == bodies
    assert [f for f in s3.bucket_files(data) if f.startswith("archive/") and f.endswith(".warc.gz")]

    # A backup is refused over a non-empty destination, and nothing there changes.
    from crawl_platform.store.transfer import TransferRefusedError  # noqa: PLC0415

    with pytest.raises(TransferRefusedError, match="is not empty"):
        backup_lake(store, dest)
    assert s3.bucket_files(backups) == files


def test_the_cli_backs_up_to_and_restores_from_a_bucket(s3_server: S3Server, store_settings: Settings,
                                                        hostile: object, tmp_path: Path) -> None:
    """A local lake backed up to ``s3://`` by ``crawl-platform backup`` and restored by ``restore``,
    with the credentials only in the environment."""
    settings = s3_server.settings(store_settings)
    store = CrawlStore.from_settings(settings)
    bodies = archive_site(hostile)  # type: ignore[arg-type]
    register(store, "c1", *bodies)
    fetch_and_land(store, "c1", "b1", list(bodies))
    url = f"s3://{s3_server.new_bucket()}/backups/b1/"
    done = cli(settings, "backup", url)
    assert done.returncode == 0, done.stderr
    done = cli(settings, "restore", url, "--lake-path", str(tmp_path / "restored"))
    assert done.returncode == 0, done.stderr
    restored = CrawlStore.from_settings(Settings(lake_path=tmp_path / "restored"))
    assert {r.url: r.body for r in archived_responses(restored, "c1")} == bodies


def test_a_data_path_in_a_bucket_nobody_made_is_one_line(s3_server: S3Server, store_settings: Settings) -> None:
    settings = s3_server.settings(store_settings).model_copy(update={"lake_data_path": "s3://no-such-bucket/lake/"})
    store = CrawlStore.from_settings(settings)
    with pytest.raises(StoreUnavailableError) as refused, store.write() as con:
        con.execute("CREATE TABLE probe AS SELECT range AS i FROM range(5000)")
    assert "\n" not in str(refused.value)


def test_maintenance_merges_a_lake_on_object_storage(s3_server: S3Server, store_settings: Settings) -> None:
    bucket = s3_server.new_bucket()
    settings = s3_server.settings(store_settings).model_copy(update={"lake_data_path": f"s3://{bucket}/lake/"})
    store = CrawlStore.from_settings(settings)
    with store.write() as con:
        con.execute("CREATE TABLE probe (i INTEGER)")
    for start in range(0, 400, 100):  # four small Parquet files
        with store.write() as con:
            con.execute(f"INSERT INTO probe SELECT range FROM range({start}, {start + 100})")
    before = [f for f in s3_server.bucket_files(bucket) if f.endswith(".parquet")]
    report = maintain_lake(store, timedelta(days=7), reader_grace=timedelta(0))
    assert report.files_merged >= len(before) == 4
    assert store.query("SELECT count(*), sum(i) FROM probe") == [(400, sum(range(400)))]


def test_a_local_lake_archives_to_a_bucket(s3_server: S3Server, store_settings: Settings, hostile: object) -> None:
    """``CRAWL_ARCHIVE_PATH=s3://…`` beside a lake on local disk: the WARC files go to the bucket,
    reached with the settings' credentials, and read back from there."""
    bucket = s3_server.new_bucket()
    settings = s3_server.settings(store_settings).model_copy(update={"archive_path": f"s3://{bucket}/warc/"})
    store = CrawlStore.from_settings(settings)
    bodies = archive_site(hostile)  # type: ignore[arg-type]
    register(store, "c1", *bodies)
    fetch_and_land(store, "c1", "b1", list(bodies))
    assert [f for f in s3_server.bucket_files(bucket) if f.startswith("warc/") and f.endswith(".warc.gz")]
    assert {r.url: r.body for r in archived_responses(store, "c1")} == bodies
