"""The ``Folder`` protocol: one place the platform keeps files, a local folder or an object store.

The raw archive (WARC files), the handoff between a run's steps and the lake's backups each live
in a :class:`Folder` named by a setting: a path for a local or mounted folder
(:class:`~crawl_platform.storage.local.LocalFolder`), ``s3://bucket/prefix/`` for S3-compatible
object storage (:class:`~crawl_platform.storage.s3.S3Folder`). The code that writes and reads
them is the same for both; :func:`crawl_platform.storage.open_folder` picks one by the name. The
lake's Parquet files are DuckDB's to write (DuckLake through ``httpfs``), not a Folder's.

A file's name inside a folder is a relative, ``/``-separated path (``2026-01-01/b-s0-1a2b.warc.gz``).
A file appears whole or not at all: a local one is written under a temporary name and renamed
once fsynced, an object is visible once its (multipart) upload completed. Errors are
:class:`OSError`: :class:`FileNotFoundError` for a missing file, :class:`StorageError` (one line,
no credentials) for an object store that refuses or cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable


class StorageError(OSError):
    """An object store refused a request or could not be reached; ``str(err)`` is one line naming
    the object, never a credential."""


class StagedFile(Protocol):
    """A file being written to a folder: write to :attr:`file`, then :meth:`commit` (the file
    appears whole under its name) or :meth:`discard` (nothing appears)."""

    name: str
    file: BinaryIO

    def commit(self) -> None:
        """Make the file visible under its name, complete; raises :class:`OSError` when it cannot."""

    def discard(self) -> None:
        """Drop the unfinished file."""


@runtime_checkable
class Folder(Protocol):
    """Files under one root, by relative name. Implementations: local path, S3 prefix."""

    @property
    def url(self) -> str:
        """The folder as settings and messages name it: an absolute path, or ``s3://bucket/prefix/``."""

    @property
    def local_path(self) -> Path | None:
        """The folder on this machine's file system; None for object storage."""

    def child(self, name: str) -> Folder:
        """The folder ``name`` inside this one (created on first write)."""

    def put_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` as the file ``name``, replacing any file of that name."""

    def put_file(self, name: str, path: Path) -> None:
        """Copy the local file ``path`` to ``name``; large files go up in parts, in parallel."""

    def staged(self, name: str) -> StagedFile:
        """A new file ``name`` to write: invisible until its :meth:`StagedFile.commit`."""

    def get_bytes(self, name: str) -> bytes:
        """The whole file ``name``; :class:`FileNotFoundError` when there is none."""

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``name`` from ``offset`` (fewer only at its end): one ranged
        read, for a single WARC record."""

    def get_file(self, name: str, path: Path) -> None:
        """Copy ``name`` to the local file ``path`` (in parallel parts from an object store)."""

    def open_read(self, name: str) -> AbstractContextManager[BinaryIO]:
        """``name`` opened for reading and seeking: the file itself when it is local, a local
        temporary copy of an object (for reading many records of one WARC file)."""

    def list(self, prefix: str = "") -> Iterator[str]:
        """The names of every file under ``prefix`` (all the folder's by default), at any depth."""

    def entries(self, prefix: str = "") -> Iterator[tuple[str, float]]:
        """Like :meth:`list`, each name with its file's modification time (seconds since the epoch)."""

    def exists(self, name: str) -> bool:
        """Whether the file ``name`` exists."""

    def delete(self, name: str) -> None:
        """Remove the file ``name``; nothing happens when there is none."""

    def delete_tree(self, prefix: str) -> None:
        """Remove every file under ``prefix/`` (a run's handoff, an unfinished backup)."""
