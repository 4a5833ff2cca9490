"""``Folder`` on both backends: a local folder and S3 (``rclone serve s3``, plain and over TLS).

The same calls, the same answers: round trips of bytes and files (a multipart upload included),
ranged reads, staged files that appear whole or not at all, listing, deletion, and the errors a
caller sees (a missing file, a refusing store, a certificate nobody vouches for).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pydantic
import pytest

from crawl_platform.config import Settings
from crawl_platform.storage import Folder, LocalFolder, ObjectStore, S3Folder, StorageError, open_folder
from crawl_platform.storage import s3 as s3_module
from tests.sites.object_store import ACCESS_KEY, SECRET_KEY, S3Server


@pytest.fixture(params=["local", "s3-http", "s3-https"])
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> Folder:
    if request.param == "local":
        return LocalFolder(tmp_path / "folder")
    server: S3Server = request.getfixturevalue("s3_server" if request.param == "s3-http" else "s3_tls_server")
    return open_folder(f"s3://{server.new_bucket()}/some/prefix/", server.object_store)


def test_bytes_and_ranges_round_trip(folder: Folder) -> None:
    folder.put_bytes("a/b/one.bin", b"0123456789")
    assert folder.get_bytes("a/b/one.bin") == b"0123456789"
    assert folder.read_range("a/b/one.bin", 3, 4) == b"3456"
    assert folder.read_range("a/b/one.bin", 8, 10) == b"89"  # cut at the end of the file
    assert folder.exists("a/b/one.bin")
    assert not folder.exists("a/b/two.bin")
    with folder.open_read("a/b/one.bin") as file:
        file.seek(5)
        assert file.read(2) == b"56"
    folder.put_bytes("a/b/one.bin", b"replaced")
    assert folder.get_bytes("a/b/one.bin") == b"replaced"


def test_missing_files_are_file_not_found(folder: Folder, tmp_path: Path) -> None:
    for read in (lambda: folder.get_bytes("nothing"), lambda: folder.read_range("nothing", 0, 1),
                 lambda: folder.get_file("nothing", tmp_path / "copy")):
        with pytest.raises(FileNotFoundError):
            read()
    folder.delete("nothing")  # no error
    assert list(folder.list()) == []


def test_large_files_go_up_in_parts(folder: Folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_module, "PART_BYTES", 5 * 1024 * 1024)  # S3's smallest part
    parts: list[int] = []
    if isinstance(folder, S3Folder):  # count the UploadPart requests boto3 sends
        folder.store.client().meta.events.register(
            "provide-client-params.s3.UploadPart", lambda params, **_: parts.append(params["PartNumber"]))
    data = os.urandom(11 * 1024 * 1024 + 17)
    (tmp_path / "big").write_bytes(data)
    folder.put_file("big/file.bin", tmp_path / "big")
    folder.get_file("big/file.bin", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == data
    assert folder.read_range("big/file.bin", 10 * 1024 * 1024, 5) == data[10 * 1024 * 1024:][:5]
    if isinstance(folder, S3Folder):
        assert sorted(parts) == [1, 2, 3]


def test_a_staged_file_appears_whole_or_not_at_all(folder: Folder) -> None:
    staged = folder.staged("day/one.warc.gz")
    staged.file.write(b"first part ")
    assert not folder.exists("day/one.warc.gz")
    assert list(folder.list()) == []
    staged.file.write(b"second part")
    staged.commit()
    assert folder.get_bytes("day/one.warc.gz") == b"first part second part"
    dropped = folder.staged("day/two.warc.gz")
    dropped.file.write(b"never seen")
    dropped.discard()
    assert list(folder.list()) == ["day/one.warc.gz"]


def test_listing_and_deleting(folder: Folder) -> None:
    for name in ("run-1/a.pickle", "run-1/sub/b.pickle", "run-2/c.pickle", "top.json"):
        folder.put_bytes(name, name.encode())
    assert sorted(folder.list()) == ["run-1/a.pickle", "run-1/sub/b.pickle", "run-2/c.pickle", "top.json"]
    assert sorted(folder.list("run-1/")) == ["run-1/a.pickle", "run-1/sub/b.pickle"]
    child = folder.child("run-1")
    assert child.get_bytes("sub/b.pickle") == b"run-1/sub/b.pickle"
    assert sorted(child.list()) == ["a.pickle", "sub/b.pickle"]
    modified = dict(folder.entries("run-2/"))
    assert list(modified) == ["run-2/c.pickle"]
    assert abs(modified["run-2/c.pickle"] - time.time()) < 120  # when it was written
    folder.delete_tree("run-1")
    assert sorted(folder.list()) == ["run-2/c.pickle", "top.json"]
    folder.delete("top.json")
    assert list(folder.list()) == ["run-2/c.pickle"]


def test_a_refusing_store_is_one_line_without_the_secret(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    wrong = ObjectStore(s3_server.endpoint_url, "us-east-1", ACCESS_KEY, "not-the-secret")
    with pytest.raises(StorageError) as refused:
        open_folder(f"s3://{bucket}/", wrong).put_bytes("x", b"x")
    message = str(refused.value)
    assert message.startswith(f"s3://{bucket}/x: ")
    assert "\n" not in message
    assert "not-the-secret" not in message
    assert SECRET_KEY not in message
    with pytest.raises(StorageError, match="does not exist"):
        open_folder("s3://no-such-bucket/", s3_server.object_store).put_bytes("x", b"x")


def test_tls_needs_the_servers_ca(s3_tls_server: S3Server) -> None:
    bucket = s3_tls_server.new_bucket()
    trusting = s3_tls_server.object_store
    assert trusting.endpoint_url.startswith("https://")
    open_folder(f"s3://{bucket}/", trusting).put_bytes("over-tls", b"secret bytes")
    untrusting = ObjectStore(trusting.endpoint_url, "us-east-1", ACCESS_KEY, SECRET_KEY)  # system CAs only
    with pytest.raises(StorageError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        open_folder(f"s3://{bucket}/", untrusting).get_bytes("over-tls")
    plain = ObjectStore(trusting.endpoint_url.replace("https://", "http://"), "us-east-1", ACCESS_KEY, SECRET_KEY)
    with pytest.raises(StorageError):  # the server speaks no plain HTTP
        open_folder(f"s3://{bucket}/", plain).get_bytes("over-tls")


def test_a_setting_names_a_local_folder_or_a_bucket(tmp_path: Path) -> None:
    assert open_folder(tmp_path / "x") == LocalFolder(tmp_path / "x")
    bucket = open_folder("s3://lake/crawl/archive", ObjectStore())
    assert isinstance(bucket, S3Folder)
    assert bucket.url == "s3://lake/crawl/archive/"
    assert bucket.child("2026-01-01").url == "s3://lake/crawl/archive/2026-01-01/"
    with pytest.raises(ValueError, match="only local paths and s3://"):
        open_folder("gs://lake/archive")


@pytest.mark.parametrize("field", ["lake_data_path", "archive_path", "lake_backup_path", "handoff_dir"])
def test_a_folder_setting_is_a_path_or_an_s3_url(field: str) -> None:
    assert getattr(Settings(**{field: "s3://crawl-lake/x/"}), field) == "s3://crawl-lake/x/"
    for wrong in ("gs://crawl-lake/x/", "s3://"):
        with pytest.raises(pydantic.ValidationError, match=r"a path or s3://bucket/prefix/"):
            Settings(**{field: wrong})
