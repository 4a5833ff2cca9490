"""``LocalFolder``: a :class:`~crawl_platform.storage.base.Folder` on this machine's file system.

The embedded default, and a mounted share when scaled out. A new file is written under a
temporary ``.part`` name beside its final one, fsynced and renamed into place (and its folder
fsynced), so a reader never sees half a file and a crash leaves at most an unreferenced ``.part``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

PART_SUFFIX = ".part"


class LocalFolder:
    """Files under ``root`` (made absolute)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"LocalFolder({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalFolder) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def url(self) -> str:
        return str(self.root)

    @property
    def local_path(self) -> Path:
        return self.root

    def path(self, name: str) -> Path:
        """The file ``name`` on disk."""
        return self.root / name

    def child(self, name: str) -> LocalFolder:
        return LocalFolder(self.root / name)

    def put_bytes(self, name: str, data: bytes) -> None:
        staged = self.staged(name)
        try:
            staged.file.write(data)
            staged.commit()
        except BaseException:
            staged.discard()
            raise

    def put_file(self, name: str, path: Path) -> None:
        target = self.path(name)
        if Path(path).absolute() == target:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + PART_SUFFIX)
        shutil.copyfile(path, part)
        part.replace(target)

    def staged(self, name: str) -> LocalStagedFile:
        return LocalStagedFile(name, self.path(name))

    def get_bytes(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        with self.path(name).open("rb") as file:
            file.seek(offset)
            return file.read(length)

    def get_file(self, name: str, path: Path) -> None:
        shutil.copyfile(self.path(name), path)

    def open_read(self, name: str) -> AbstractContextManager[BinaryIO]:
        return self.path(name).open("rb")

    def list(self, prefix: str = "") -> Iterator[str]:
        for name, _modified in self.entries(prefix):
            yield name

    def entries(self, prefix: str = "") -> Iterator[tuple[str, float]]:
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return
        for path in sorted(base.rglob("*")):
            if path.name.endswith(PART_SUFFIX):
                continue
            try:
                if path.is_file():
                    yield path.relative_to(self.root).as_posix(), path.stat().st_mtime
            except FileNotFoundError:  # removed meanwhile
                continue

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def delete_tree(self, prefix: str) -> None:
        shutil.rmtree(self.root / prefix if prefix else self.root, ignore_errors=True)


class LocalStagedFile:
    """A file written as ``<name>.part`` and renamed to its name once complete and fsynced."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self._part = path.with_name(path.name + PART_SUFFIX)
        self._part.parent.mkdir(parents=True, exist_ok=True)
        self.file: BinaryIO = self._part.open("wb")

    def commit(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self._part, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    def discard(self) -> None:
        self.file.close()
        self._part.unlink(missing_ok=True)
