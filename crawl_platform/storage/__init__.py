"""Where the platform keeps its files: a local folder or S3-compatible object storage.

:func:`open_folder` turns a setting's value (``CRAWL_ARCHIVE_PATH``, ``CRAWL_HANDOFF_DIR``,
``CRAWL_LAKE_BACKUP_PATH``) into a :class:`Folder`: ``s3://bucket/prefix/`` for object storage,
anything else a local path. The protocol is in :mod:`~crawl_platform.storage.base`, the two
implementations in :mod:`~crawl_platform.storage.local` and :mod:`~crawl_platform.storage.s3`.
The store (:mod:`crawl_platform.store`) uses the same :class:`ObjectStore` for the lake's
Parquet files through DuckDB. Nothing here imports the rest of the platform.
"""

from __future__ import annotations

from pathlib import Path

from crawl_platform.storage.base import Folder, StagedFile, StorageError
from crawl_platform.storage.local import LocalFolder
from crawl_platform.storage.s3 import ObjectStore, S3Folder

__all__ = ["Folder", "LocalFolder", "ObjectStore", "S3Folder", "StagedFile", "StorageError", "as_folder",
           "is_object_url", "open_folder"]


def is_object_url(where: str | Path) -> bool:
    """Whether ``where`` names object storage (``s3://…``) rather than a local path."""
    return str(where).startswith("s3://")


def open_folder(where: str | Path, store: ObjectStore | None = None) -> Folder:
    """The folder ``where`` names: an ``s3://bucket/prefix/`` URL (reached with ``store``, or
    boto3's own lookup of the AWS variables when None), else a local path."""
    text = str(where)
    if is_object_url(text):
        return S3Folder.from_url(text, store or ObjectStore())
    if "://" in text:
        raise ValueError(f"{text!r}: only local paths and s3://bucket/prefix/ URLs name a folder")
    return LocalFolder(Path(text))


def as_folder(where: Folder | Path) -> Folder:
    """``where`` as a folder: a local path becomes a :class:`LocalFolder`."""
    return LocalFolder(where) if isinstance(where, Path) else where
