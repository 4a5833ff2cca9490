"""Settings of object storage: the standard AWS variables, read once into the typed settings.

Part of :class:`crawl_platform.config.Settings`; :class:`crawl_platform.storage.ObjectStore`
reads them. They apply wherever a setting names ``s3://bucket/prefix/`` (the lake's data path,
the raw archive, the handoff, backups). Set them in the environment of every process; they never
enter run config or metadata. Empty ones are left to boto3's own lookup (``~/.aws``, an instance
role), except for the lake's Parquet files: DuckDB is given only what is set here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings


def folder_location(value: str | Path) -> str:
    """A setting that names a folder: a path, or ``s3://bucket/prefix/`` (object storage)."""
    text = str(value)
    if "://" in text and not (text.startswith("s3://") and text[5:].strip("/")):
        raise ValueError("a path or s3://bucket/prefix/")
    return text


class ObjectStoreSettings(BaseSettings):
    """Object storage (S3-compatible): credentials, endpoint, region, TLS (docs/storage.md)."""

    aws_access_key_id: str = Field(
        "", validation_alias=AliasChoices("AWS_ACCESS_KEY_ID", "aws_access_key_id"), repr=False,
        description="Access key id for object storage (`s3://` paths).",
    )
    aws_secret_access_key: SecretStr = Field(
        SecretStr(""), validation_alias=AliasChoices("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        description="Secret access key for object storage. A secret: set it in the environment only; "
        "it is never logged or shown.",
    )
    aws_session_token: SecretStr = Field(
        SecretStr(""), validation_alias=AliasChoices("AWS_SESSION_TOKEN", "aws_session_token"),
        description="Session token of temporary credentials, if any; a secret.",
    )
    aws_endpoint_url: str = Field(
        "", validation_alias=AliasChoices("AWS_ENDPOINT_URL", "aws_endpoint_url"),
        description="Endpoint of an S3-compatible store (MinIO, Ceph RGW, R2, ...), e.g. "
        "`https://s3.internal:9000`; empty for AWS S3. `https://` is TLS with the server's certificate "
        "checked (against `AWS_CA_BUNDLE` if set); `http://` is plain text.",
    )
    aws_region: str = Field(
        "", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION", "aws_region"),
        description="Region of the bucket (AWS S3 needs it; most S3-compatible servers ignore it).",
    )
    aws_ca_bundle: str = Field(
        "", validation_alias=AliasChoices("AWS_CA_BUNDLE", "aws_ca_bundle"),
        description="PEM file of the CA that signed an `https://` endpoint's certificate, for a private "
        "CA; empty: the system's CAs. Both clients use it: boto3 (archive, handoff, backups) and DuckDB "
        "(the lake's Parquet files).",
    )
    s3_url_style: Literal["auto", "path", "vhost"] = Field(
        "auto", validation_alias=AliasChoices("CRAWL_S3_URL_STYLE", "s3_url_style"),
        description="How a bucket is addressed: `path` (`endpoint/bucket/key`, what most S3-compatible "
        "servers need), `vhost` (`bucket.endpoint/key`, AWS's), `auto`: `path` with `AWS_ENDPOINT_URL`, "
        "`vhost` without.",
    )
