"""Encryption in transit to Kafka and to PostgreSQL (object storage over TLS is in
test_storage.py and test_object_storage.py).

Kafka: the TLS settings reach librdkafka, which completes a TLS handshake with a loopback server
holding a certificate of the test's own CA and then sends its first Kafka request inside it; a
client that does not trust that CA refuses the server. PostgreSQL: libpq reads ``sslmode`` and
``sslrootcert`` from the catalog's connection string, which the platform hands over untouched,
to both of its PostgreSQL clients (DuckDB's extension and psycopg2).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore, StoreUnavailableError
from crawl_platform.store.location import LakeLocation
from tests.conftest import lake_catalog
from tests.sites.alert_receivers import LoopbackCertificate

API_VERSIONS = 18  # the first request a Kafka client sends on a new connection


class TLSListener:
    """A loopback TLS server that records, per connection, whether the handshake succeeded and
    the API key of the first Kafka request read inside it."""

    def __init__(self, cert: LoopbackCertificate) -> None:
        self.context = cert.server_context()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.api_keys: list[int] = []
        self.failed_handshakes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            raw.settimeout(5)
            try:
                with self.context.wrap_socket(raw, server_side=True) as tls:
                    head = tls.recv(6)  # int32 size, int16 api_key
                    if len(head) == 6:
                        self.api_keys.append(struct.unpack(">ih", head)[1])
            except (ssl.SSLError, OSError):
                self.failed_handshakes += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def tls_listener(tmp_path: Path) -> Iterator[tuple[TLSListener, LoopbackCertificate]]:
    cert = LoopbackCertificate(tmp_path)
    listener = TLSListener(cert)
    yield listener, cert
    listener.close()


def _connect(settings: Settings) -> None:
    """One metadata request through a client built from ``settings.kafka_config()`` (what every
    producer, consumer and admin client of the platform is built from); it times out here."""
    client = AdminClient({**settings.kafka_config(), "socket.timeout.ms": "2000"})
    with pytest.raises(KafkaException):  # no broker answers: only the handshake matters
        client.list_topics(timeout=3)


def test_kafka_clients_speak_tls_to_a_broker_of_a_trusted_ca(tls_listener, tmp_path: Path) -> None:
    listener, cert = tls_listener
    settings = Settings(kafka_bootstrap_servers=f"127.0.0.1:{listener.port}", kafka_security_protocol="ssl",
                        kafka_ssl_ca_location=str(cert.ca_file))
    assert settings.kafka_config()["security.protocol"] == "ssl"
    _connect(settings)
    assert API_VERSIONS in listener.api_keys  # a Kafka request, read inside the TLS session


def test_kafka_clients_refuse_a_broker_whose_ca_they_do_not_trust(tls_listener) -> None:
    listener, _cert = tls_listener
    _connect(Settings(kafka_bootstrap_servers=f"127.0.0.1:{listener.port}", kafka_security_protocol="ssl"))
    assert listener.api_keys == []
    assert listener.failed_handshakes >= 1


def test_the_tls_settings_override_the_client_config_and_hide_the_key_password() -> None:
    settings = Settings(kafka_client_config={"security.protocol": "plaintext", "ssl.ca.location": "/old.pem"},
                        kafka_security_protocol="sasl_ssl", kafka_ssl_ca_location="/etc/kafka/ca.pem",
                        kafka_ssl_certificate_location="/etc/kafka/client.pem",
                        kafka_ssl_key_location="/etc/kafka/client.key",
                        kafka_ssl_key_password=SecretStr("key-Pw-9"))
    config = settings.kafka_config()
    assert {k: v for k, v in config.items() if k.startswith(("security", "ssl"))} == {
        "security.protocol": "sasl_ssl", "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem", "ssl.key.location": "/etc/kafka/client.key",
        "ssl.key.password": "key-Pw-9"}
    assert "key-Pw-9" not in repr(settings)
    assert Settings().kafka_config() == {"bootstrap.servers": "127.0.0.1:19092"}  # nothing set, nothing added


def test_the_catalogs_sslmode_reaches_libpq_untouched(postgres_url: str, tmp_path: Path) -> None:
    """The machine's PostgreSQL has no TLS: ``sslmode=require`` makes libpq refuse it, which shows
    the setting reached it; ``sslmode=disable`` on the same server opens the lake."""
    dsn = lake_catalog(postgres_url) + " sslmode=require sslrootcert=/etc/crawl/pg-ca.pem"
    location = LakeLocation.from_settings(Settings(lake_catalog=dsn, lake_data_path=str(tmp_path / "data")))
    assert location.catalog == dsn
    assert f"'ducklake:{dsn}'" in location.attach_sql()
    with pytest.raises(StoreUnavailableError, match="SSL"):
        CrawlStore(location).ensure_schema()

    plain = LakeLocation(lake_catalog(postgres_url) + " sslmode=disable", location.data_path)
    store = CrawlStore(plain)
    try:
        assert store.snapshot_id() >= 1
    finally:
        store.close()
