"""Settings of the Kafka bus: where the brokers are, the client options, the topics.

Part of :class:`crawl_platform.config.Settings`; :mod:`crawl_platform.bus.kafka` reads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings


class BusSettings(BaseSettings):
    """Kafka: the brokers, librdkafka options, topic names and partitions."""

    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:19092",
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "kafka_bootstrap_servers"),
        description="Kafka bootstrap servers (`host:port`, comma-separated). When it is unset, "
        "`crawl-platform up` starts the embedded broker at this address.",
    )
    kafka_client_config: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("KAFKA_CLIENT_CONFIG", "kafka_client_config"), repr=False,
        description="JSON object of extra librdkafka settings for every producer, consumer and admin "
        "client, e.g. `security.protocol`, `sasl.*`, `ssl.*` (docs/kafka.md). With `sasl.password` in "
        "it, it is a secret: never shown.",
    )
    kafka_security_protocol: Literal["", "plaintext", "ssl", "sasl_plaintext", "sasl_ssl"] = Field(
        "", validation_alias=AliasChoices("KAFKA_SECURITY_PROTOCOL", "kafka_security_protocol"),
        description="librdkafka's `security.protocol`: `ssl` (TLS) or `sasl_ssl` (TLS with a SASL login, "
        "whose `sasl.*` settings go in `KAFKA_CLIENT_CONFIG`) encrypt every connection to the brokers, "
        "whose certificates are checked against `KAFKA_SSL_CA_LOCATION` and their host names; empty: "
        "`KAFKA_CLIENT_CONFIG`'s, else plain text.",
    )
    kafka_ssl_ca_location: str = Field(
        "", validation_alias=AliasChoices("KAFKA_SSL_CA_LOCATION", "kafka_ssl_ca_location"),
        description="librdkafka's `ssl.ca.location`: PEM file of the CA that signed the brokers' "
        "certificates; empty: the system's CAs.",
    )
    kafka_ssl_certificate_location: str = Field(
        "", validation_alias=AliasChoices("KAFKA_SSL_CERTIFICATE_LOCATION", "kafka_ssl_certificate_location"),
        description="librdkafka's `ssl.certificate.location`: the client's certificate (PEM), for brokers "
        "that authenticate clients by certificate (mutual TLS).",
    )
    kafka_ssl_key_location: str = Field(
        "", validation_alias=AliasChoices("KAFKA_SSL_KEY_LOCATION", "kafka_ssl_key_location"),
        description="librdkafka's `ssl.key.location`: the client certificate's private key (PEM).",
    )
    kafka_ssl_key_password: SecretStr = Field(
        SecretStr(""), validation_alias=AliasChoices("KAFKA_SSL_KEY_PASSWORD", "kafka_ssl_key_password"),
        description="librdkafka's `ssl.key.password`, if the key is encrypted. A secret: never shown.",
    )
    kafka_producer_config: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("KAFKA_PRODUCER_CONFIG", "kafka_producer_config"), repr=False,
        description="JSON object of extra librdkafka producer settings.",
    )
    kafka_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "lz4", validation_alias=AliasChoices("KAFKA_COMPRESSION", "kafka_compression"),
        description="How the producers compress each batch of messages (librdkafka's `compression.type`). "
        "`lz4` costs no measurable CPU and keeps the messages in a quarter to a third of the bytes, on the "
        "brokers and on the wire; every Kafka client reads it (kafka-python with the `lz4` package). "
        "`KAFKA_PRODUCER_CONFIG` can still override it.",
    )
    kafka_exact_log_ends: bool = Field(
        False,
        validation_alias=AliasChoices("KAFKA_EXACT_LOG_ENDS", "kafka_exact_log_ends"),
        description="Find where each partition's log ends by reading its tail instead of trusting the "
        "broker's high watermark: one short read per partition per look. The embedded Tansu 0.6 "
        "broker needs it (`up` and the tests turn it on): its high watermark stops at the first record "
        "of the last record batch. Leave it off on a real cluster.",
    )
    seeds_topic: str = Field(
        "crawl.seeds", validation_alias=AliasChoices("CRAWL_SEEDS_TOPIC", "seeds_topic"),
        description="Topic of crawl requests: what `crawl-platform crawl`, the Launchpad and any producer submit.",
    )
    frontier_topic: str = Field(
        "crawl.frontier", validation_alias=AliasChoices("CRAWL_FRONTIER_TOPIC", "frontier_topic"),
        description="Topic of URLs to fetch, keyed by host, so one partition owns a host's politeness.",
    )
    dead_letter_topic: str = Field(
        "crawl.dead-letter", validation_alias=AliasChoices("CRAWL_DEAD_LETTER_TOPIC", "dead_letter_topic"),
        description="Topic of messages that could not be applied, each with the reason and its topic, "
        "partition and offset (docs/limits.md).",
    )
    pages_topic: str = Field(
        "crawl.pages", validation_alias=AliasChoices("CRAWL_PAGES_TOPIC", "pages_topic"),
        description="Topic of page events: one message per landed page version, keyed by URL, "
        "published after the landing commits, at least once (docs/kafka.md).",
    )
    page_events: bool = Field(
        True, validation_alias=AliasChoices("CRAWL_PAGE_EVENTS", "page_events"),
        description="Publish page events on `CRAWL_PAGES_TOPIC`; `false` leaves the topic empty.",
    )
    control_topic: str = Field(
        "crawl.control", validation_alias=AliasChoices("CRAWL_CONTROL_TOPIC", "control_topic"),
        description="Topic of control commands (cancel, pause, resume a crawl), keyed by crawl id.",
    )
    topic_partitions: int = Field(
        8, ge=1, validation_alias=AliasChoices("CRAWL_TOPIC_PARTITIONS", "topic_partitions"),
        description="Partitions of each topic the platform creates. One batch run reads a partition at a "
        "time, so this bounds concurrent batch runs (see `CRAWL_BATCH_GROUPS`). `dagster.yaml` must limit "
        "every frontier partition (run tag `crawl/frontier_p<N>`, limit 1): `up` refuses to start (one "
        "line, exit 2) when it does not cover this many partitions or an existing frontier topic's count, "
        "and the frontier sensor launches no batch while the topic has a partition the instance leaves "
        "unlimited (its skip reason names them).",
    )

    def kafka_config(self) -> dict[str, str]:
        """librdkafka base configuration shared by producers, consumers and admin clients: the
        TLS settings that are set override the same keys in ``KAFKA_CLIENT_CONFIG``."""
        tls = {"security.protocol": self.kafka_security_protocol, "ssl.ca.location": self.kafka_ssl_ca_location,
               "ssl.certificate.location": self.kafka_ssl_certificate_location,
               "ssl.key.location": self.kafka_ssl_key_location,
               "ssl.key.password": self.kafka_ssl_key_password.get_secret_value()}
        return {"bootstrap.servers": self.kafka_bootstrap_servers, **self.kafka_client_config,
                **{key: value for key, value in tls.items() if value}}
