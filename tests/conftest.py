"""Shared fixtures: a real Kafka-wire broker, DuckDB files, demo sites and the Python docs on loopback, PostgreSQL.

Each test gets its own topics (unique names on the session's broker) and its own DuckDB file,
so tests never see each other's messages or rows. ``store`` and ``store_settings`` need no broker;
``settings``, ``bus`` and ``crawl_env`` start the session's broker the first time a test asks.
"""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from crawl_platform.bus.base import Record
from crawl_platform.bus.broker import EMBEDDED_BUS_SETTINGS, EmbeddedBroker, free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.cli.demo_site import DemoSite, SiteServer
from crawl_platform.config import Settings
from crawl_platform.render import rendering_problem
from crawl_platform.store.database import CrawlStore
from tests.sites.alert_receivers import LoopbackCertificate, SMTPReceiver, WebhookReceiver
from tests.sites.docs import DocsSite
from tests.sites.near_copies import serve_near_copy_site
from tests.sites.object_store import S3Server

POSTGRES_ADMIN_URL = os.environ.get("CRAWL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
# The rendering tests need Chromium: without it they are skipped on a developer's machine, with the
# line saying what to install, and fail under CI (.ci/run installs it), where a skip would hide it.
requires_browser = pytest.mark.skipif(rendering_problem() is not None and not os.environ.get("CI"),
                                      reason=str(rendering_problem()))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test that measures wall-clock gaps, move what the session holds (every collected
    module, the fixtures so far) out of reach of Python's cyclic collector, as the run processes
    do after their imports (crawl_platform_dagster/warm.py). Otherwise a full collection of that
    heap can fall inside a measured gap: a quarter of a second or more once the whole suite has
    been collected, far past a timing test's slack."""
    if item.get_closest_marker("timing") is not None:
        gc.collect()
        gc.freeze()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(port=0, log_path=tmp_path_factory.mktemp("broker") / "tansu.log") as running:
        yield running


@pytest.fixture
def store_settings(tmp_path: Path) -> Settings:
    """Settings for one test that needs no broker: own topic names, own DuckDB file, no politeness
    delay, loopback allowed. Kafka points at a loopback port nothing listens on, so asking for it
    fails instead of reaching a broker someone runs here; a test that needs one uses ``settings``."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        kafka_bootstrap_servers=f"127.0.0.1:{free_port()}",
        seeds_topic=f"seeds-{tag}",
        frontier_topic=f"frontier-{tag}",
        dead_letter_topic=f"dead-{tag}",
        pages_topic=f"pages-{tag}",
        control_topic=f"control-{tag}",
        topic_partitions=4,
        lake_path=tmp_path / "lake",
        dagster_home=tmp_path / "dagster_home",
        handoff_dir=tmp_path / "handoff",
        host_delay_ms=0,
        allowed_networks=["127.0.0.0/8"],
        batch_size=50,
    )


@pytest.fixture
def settings(broker: EmbeddedBroker, store_settings: Settings) -> Settings:
    """``store_settings`` on the session's broker (same topics and DuckDB file as ``store`` uses)."""
    return store_settings.model_copy(update={"kafka_bootstrap_servers": broker.bootstrap_servers,
                                             **EMBEDDED_BUS_SETTINGS})


def export_settings(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Put ``settings`` in the environment (undone after the test), as a process started with
    them would read them; returns them."""
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    return settings


@pytest.fixture
def crawl_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Export ``settings`` to the environment, as the Dagster resources read it at run time."""
    return export_settings(settings, monkeypatch)


@pytest.fixture
def bus(settings: Settings) -> Iterator[KafkaBus]:
    kafka = KafkaBus.from_settings(settings)
    kafka.ensure_topics()
    yield kafka
    kafka.close()


@pytest.fixture
def batching_producer(settings: Settings) -> Iterator[object]:
    """A kafka-python producer on the session's broker: a second, independent Kafka client that,
    like most producers, packs the messages it sends together into one record batch."""
    from kafka import KafkaProducer  # noqa: PLC0415 - only the tests of outside producers need it

    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, linger_ms=500,
                             batch_size=1 << 20)
    yield producer
    producer.close(5)


def all_records(bus: KafkaBus, topic: str) -> list[Record]:
    """Every record of ``topic``, to the real end of each partition's log."""
    return [rec for part, (low, high) in bus.log_ends(topic).items() if high > low
            for rec in bus.read_range(topic, OffsetRange(part, low, high))]


@pytest.fixture
def store(store_settings: Settings) -> CrawlStore:
    """The test's own DuckDB file with the schema in place; starts no broker."""
    crawl_store = CrawlStore.from_settings(store_settings)
    crawl_store.ensure_schema()
    return crawl_store


@pytest.fixture
def site() -> Iterator[SiteServer]:
    with DemoSite(n_pages=120, seed=7).serve() as server:
        yield server


@pytest.fixture
def python_docs() -> Iterator[DocsSite]:
    """The Python 3.11 documentation (Debian's python3.11-doc) on loopback, logging every request."""
    with DocsSite() as docs:
        yield docs


@pytest.fixture
def news_site() -> Iterator[tuple[object, dict[str, bytes], list[set[str]]]]:
    """A generated news site with planted near and exact copies (tests/sites/near_copies.py):
    (server, pages by path, planted groups of paths)."""
    with serve_near_copy_site() as served:
        yield served


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """A new PostgreSQL database on the machine's server, dropped afterwards."""
    import psycopg2  # noqa: PLC0415 - only the tests that need PostgreSQL pay for it

    name = f"crawl_test_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(POSTGRES_ADMIN_URL)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        _detach_lakes_of(f"dbname={name} ")
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def lake_catalog(postgres_url: str, user: str = "postgres", password: str = "") -> str:
    """The ``CRAWL_LAKE_CATALOG`` value of a lake whose catalog is the database at ``postgres_url``."""
    catalog = f"postgres:dbname={postgres_url.rsplit('/', 1)[1]} host=127.0.0.1 user={user}"
    return f"{catalog} password={password}" if password else catalog


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_postgres_database() as url:
        yield url


CATALOG_PASSWORD = "Pw-n3ver-sh0wn"  # a test role's password, which nothing may show


@pytest.fixture
def password_catalog() -> Iterator[str]:
    """The ``CRAWL_LAKE_CATALOG`` of a fresh database owned by a role of its own, with the role's
    password (:data:`CATALOG_PASSWORD`) in the connection string. Whether the server checks it (it
    trusts loopback on this machine) or not, nothing that shows the catalog may show the password."""
    import psycopg2  # noqa: PLC0415 - only the tests that need PostgreSQL pay for it

    role = f"crawl_secret_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(POSTGRES_ADMIN_URL)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN PASSWORD %s", [CATALOG_PASSWORD])
    try:
        with fresh_postgres_database() as url:
            with admin.cursor() as cur:
                cur.execute(f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" OWNER TO {role}')
            yield lake_catalog(url, user=role, password=CATALOG_PASSWORD)
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()


def _detach_lakes_of(catalog_part: str) -> None:
    """Detach from this process's DuckDB the lakes whose catalog string holds ``catalog_part``, before
    their database is dropped: a name the binder fails to find in a later test is looked for in
    every attached catalog (for a suggestion), and a gone one would fail that lookup instead."""
    from crawl_platform.store import engine as store_engine  # noqa: PLC0415

    engine = store_engine._ENGINE
    if engine is None:
        return
    for (name,) in engine.execute("SELECT database_name FROM duckdb_databases() WHERE type = 'ducklake' "
                                  "AND contains(path || ' ', ?)", [catalog_part]).fetchall():
        engine.execute(f'DETACH "{name}"')


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    """A webhook receiver on loopback that records the alerts POSTed to it."""
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture
def smtp_server() -> Iterator[SMTPReceiver]:
    """An SMTP server on loopback (aiosmtpd) that records the alert mails it accepts."""
    with SMTPReceiver() as receiver:
        yield receiver


def alert_settings(settings: Settings, webhook: WebhookReceiver | None = None,
                   smtp: SMTPReceiver | None = None, **overrides: object) -> Settings:
    """``settings`` sending alerts to the test's receivers."""
    update: dict[str, object] = {"ui_url": "http://ui.test:3000"}
    if webhook is not None:
        update["alert_webhook_url"] = webhook.url
    if smtp is not None:
        update.update(alert_smtp_host=smtp.host, alert_smtp_port=smtp.port, alert_email_from="crawler@test.local",
                      alert_email_to=["ops@test.local", "oncall@test.local"])
    return settings.model_copy(update={**update, **overrides})


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server on loopback (``rclone serve s3``), plain HTTP; each test takes
    a bucket of its own with ``s3_server.new_bucket()``."""
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="session")
def s3_tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The same server on HTTPS only, with a certificate of a CA the test made (``AWS_CA_BUNDLE``
    in its settings)."""
    folder = tmp_path_factory.mktemp("s3-tls")
    with S3Server(folder, tls=LoopbackCertificate(folder)) as server:
        yield server


@pytest.fixture(params=["http", "https"])
def s3(request: pytest.FixtureRequest) -> S3Server:
    """The S3 server, once plain and once over TLS."""
    return request.getfixturevalue("s3_server" if request.param == "http" else "s3_tls_server")
