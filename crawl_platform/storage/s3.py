"""S3-compatible object storage: the connection (:class:`ObjectStore`) and ``S3Folder``.

:class:`ObjectStore` holds what reaching the store takes, from the standard AWS variables read
into :class:`~crawl_platform.config.Settings`: the key pair (and session token), the endpoint
(``AWS_ENDPOINT_URL``, for MinIO, Ceph RGW, R2 or any S3-compatible server; AWS itself without
it), the region and a CA bundle for a private CA. An ``https://`` endpoint (and AWS) is TLS,
with the server's certificate checked. It serves the two clients the platform has: boto3 for the
files the platform writes itself (:class:`S3Folder`), and the DuckDB secret through which
``httpfs`` reads and writes the lake's Parquet files (made by :mod:`crawl_platform.store.location`).
Credentials stay in the process: nothing here is put in run config, metadata or messages.

boto3 is the client because it reads the AWS variables, profiles and instance roles itself when
the settings leave them empty, and its managed transfers upload a large file in parallel parts
(multipart upload) and download it in parallel ranges.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from crawl_platform.storage.base import StorageError

if TYPE_CHECKING:
    from crawl_platform.config import Settings

PART_BYTES = 16 * 1024 * 1024
"""Size of one part of a multipart upload and of one ranged download: files above it go up in
parts, in parallel (S3 allows 10,000 parts, so a file of up to 160 GB)."""
TRANSFER_THREADS = 4


@dataclass(frozen=True, repr=False)
class ObjectStore:
    """How to reach an S3-compatible store; empty fields are left to boto3's own lookup."""

    endpoint_url: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""
    ca_bundle: str = ""
    url_style: str = "auto"  # auto: path-style with an endpoint, virtual-hosted on AWS

    def __repr__(self) -> str:
        return f"ObjectStore({self.endpoint_url or 'AWS'!r}, region={self.region!r})"

    @classmethod
    def from_settings(cls, settings: Settings) -> ObjectStore:
        return cls(settings.aws_endpoint_url, settings.aws_region, settings.aws_access_key_id,
                   settings.aws_secret_access_key.get_secret_value(),
                   settings.aws_session_token.get_secret_value(), settings.aws_ca_bundle, settings.s3_url_style)

    @property
    def path_style(self) -> bool:
        return self.url_style == "path" or (self.url_style == "auto" and bool(self.endpoint_url))

    @property
    def use_ssl(self) -> bool:
        return not self.endpoint_url or urlsplit(self.endpoint_url).scheme == "https"

    @property
    def endpoint_host(self) -> str:
        """``host:port`` of the endpoint, as DuckDB's secret names it."""
        return urlsplit(self.endpoint_url).netloc

    def client(self) -> Any:
        """The process's boto3 S3 client for this store (clients are thread-safe; made once)."""
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(self)
            if client is None:
                import boto3  # noqa: PLC0415 - only object storage needs it, and it imports slowly
                from botocore.config import Config  # noqa: PLC0415

                session = boto3.session.Session(
                    aws_access_key_id=self.access_key_id or None,
                    aws_secret_access_key=self.secret_access_key or None,
                    aws_session_token=self.session_token or None, region_name=self.region or None)
                config = Config(s3={"addressing_style": "path" if self.path_style else "virtual"},
                                retries={"max_attempts": 5, "mode": "standard"},
                                max_pool_connections=max(10, TRANSFER_THREADS * 4),
                                # Checksums only where S3 requires them: S3-compatible servers differ
                                # in the flexible checksums they keep, and some send a whole object's
                                # checksum with a ranged read (of one WARC record).
                                request_checksum_calculation="when_required",
                                response_checksum_validation="when_required")
                client = _CLIENTS[self] = session.client(
                    "s3", endpoint_url=self.endpoint_url or None, verify=self.ca_bundle or None, config=config)
            return client

    def transfer_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig  # noqa: PLC0415

        return TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
                              max_concurrency=TRANSFER_THREADS, use_threads=True)


_CLIENTS: dict[ObjectStore, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def split_s3_url(url: str) -> tuple[str, str]:
    """(bucket, key prefix ending in ``/`` or empty) of ``s3://bucket/prefix``."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"{url!r} is not an s3://bucket/prefix URL")
    prefix = parts.path.strip("/")
    return parts.netloc, f"{prefix}/" if prefix else ""


class S3Folder:
    """Objects under ``s3://bucket/prefix/``, each file one object of key ``prefix + name``."""

    def __init__(self, store: ObjectStore, bucket: str, prefix: str = "") -> None:
        self.store = store
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    @classmethod
    def from_url(cls, url: str, store: ObjectStore) -> S3Folder:
        return cls(store, *split_s3_url(url))

    def __repr__(self) -> str:
        return f"S3Folder({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3Folder) and (other.store, other.url) == (self.store, self.url)

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def local_path(self) -> None:
        return None

    def key(self, name: str) -> str:
        return self.prefix + name.lstrip("/")

    def child(self, name: str) -> S3Folder:
        return S3Folder(self.store, self.bucket, self.key(name))

    def put_bytes(self, name: str, data: bytes) -> None:
        with self._errors(name):
            self.store.client().put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    def put_file(self, name: str, path: Path) -> None:
        with self._errors(name):
            self.store.client().upload_file(str(path), self.bucket, self.key(name),
                                            Config=self.store.transfer_config())

    def staged(self, name: str) -> S3StagedFile:
        return S3StagedFile(self, name)

    def get_bytes(self, name: str) -> bytes:
        with self._errors(name):
            body = self.store.client().get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        with self._errors(name):
            try:
                body = self.store.client().get_object(Bucket=self.bucket, Key=self.key(name),
                                                      Range=f"bytes={offset}-{offset + length - 1}")["Body"]
            except Exception as err:
                if _code(err) == "InvalidRange":  # the object ends before offset
                    return b""
                raise
            try:
                return bytes(body.read())
            finally:
                body.close()

    def get_file(self, name: str, path: Path) -> None:
        with self._errors(name):
            self.store.client().download_file(self.bucket, self.key(name), str(path),
                                              Config=self.store.transfer_config())

    @contextmanager
    def open_read(self, name: str) -> Iterator[BinaryIO]:
        with tempfile.TemporaryFile(prefix="crawl-platform-") as copy:
            with self._errors(name):
                self.store.client().download_fileobj(self.bucket, self.key(name), copy,
                                                     Config=self.store.transfer_config())
            copy.seek(0)
            yield copy

    def list(self, prefix: str = "") -> Iterator[str]:
        for name, _modified in self.entries(prefix):
            yield name

    def entries(self, prefix: str = "") -> Iterator[tuple[str, float]]:
        start = self.key(prefix) if prefix else self.prefix
        with self._errors(prefix):
            pages = self.store.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start)
            for page in pages:
                for item in page.get("Contents", []):
                    yield str(item["Key"])[len(self.prefix):], item["LastModified"].timestamp()

    def exists(self, name: str) -> bool:
        try:
            with self._errors(name):
                self.store.client().head_object(Bucket=self.bucket, Key=self.key(name))
        except FileNotFoundError:
            return False
        return True

    def delete(self, name: str) -> None:
        with self._errors(name):
            self.store.client().delete_object(Bucket=self.bucket, Key=self.key(name))

    def delete_tree(self, prefix: str) -> None:
        base = prefix.strip("/") + "/" if prefix.strip("/") else ""
        keys = [self.key(name) for name in self.list(base)]
        client = self.store.client()
        for start in range(0, len(keys), 1000):  # S3's limit per DeleteObjects request
            with self._errors(prefix):
                client.delete_objects(Bucket=self.bucket, Delete={
                    "Objects": [{"Key": key} for key in keys[start:start + 1000]], "Quiet": True})

    @contextmanager
    def _errors(self, name: str) -> Iterator[None]:
        """botocore's errors as :class:`FileNotFoundError` or a one-line :class:`StorageError`."""
        try:
            yield
        except Exception as err:
            module = type(err).__module__
            if not module.startswith(("botocore", "boto3", "s3transfer", "urllib3")):
                raise  # a local file's OSError among them
            where = f"s3://{self.bucket}/{self.key(name)}"
            if _code(err) in {"NoSuchKey", "404", "NotFound"}:
                raise FileNotFoundError(errno.ENOENT, "No such object", where) from None
            if _code(err) == "NoSuchBucket":
                raise StorageError(f"{where}: the bucket {self.bucket} does not exist") from None
            raise StorageError(f"{where}: {' '.join(str(err).split())[:300]}") from None


class S3StagedFile:
    """A file written to a local temporary file and uploaded (in parts) on :meth:`commit`: the
    object appears only when its upload completes."""

    def __init__(self, folder: S3Folder, name: str) -> None:
        self.folder = folder
        self.name = name
        handle, path = tempfile.mkstemp(prefix="crawl-platform-", suffix=".part")
        self._path = Path(path)
        self.file: BinaryIO = os.fdopen(handle, "w+b")

    def commit(self) -> None:
        self.file.close()
        try:
            self.folder.put_file(self.name, self._path)
        finally:
            self._path.unlink(missing_ok=True)

    def discard(self) -> None:
        self.file.close()
        self._path.unlink(missing_ok=True)


def _code(err: BaseException) -> str:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""

