"""Reads stored responses back from the raw archive, never from the network.

The fetch steps write every response as a gzip WARC record (:mod:`crawl_platform.archive.writer`)
and ``pages`` keeps each version's ``warc_file`` (relative to the archive folder),
``warc_offset`` and ``warc_length``: one gzip member, readable alone. The archive is a
:class:`~crawl_platform.storage.Folder`, local or in object storage. :func:`read_response` reads
one record (one ranged read of an object); :func:`archived_responses` streams a crawl's stored
responses (the re-parse path of extraction rules and main-content assets, and ``crawl-platform
show`` / ``export``), opening each WARC file once (an object is fetched once, in parallel ranges)
and seeking from record to record. The records are parsed by fastwarc.
"""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from fastwarc.warc import ArchiveIterator, WarcRecordType

from crawl_platform.config import Settings
from crawl_platform.storage import Folder
from crawl_platform.store import pages
from crawl_platform.store.database import CrawlStore


class ArchiveReadError(Exception):
    """A record could not be read (file missing, offset wrong, not a WARC response record);
    ``str(err)`` is one line naming the file and offset."""


@dataclass(frozen=True)
class ArchivedResponse:
    """One stored response of a page version, as fetched."""

    url: str
    version: int
    crawl_id: str
    final_url: str
    status: int
    content_type: str | None
    headers: list[tuple[str, str]]  # the response's HTTP headers, in order, duplicates kept
    body: bytes  # decoded (no Content-Encoding), as the parser saw it
    fetched_at: datetime  # UTC, naive (like pages.fetched_at)


def archive_folder(settings: Settings) -> Folder:
    """The folder WARC files live in: CRAWL_ARCHIVE_PATH, or the lake's default (docs/storage.md)."""
    return CrawlStore.from_settings(settings).archive


def read_response(archive: Folder, warc_file: str, offset: int, length: int) -> tuple[list[tuple[str, str]], bytes]:
    """(HTTP headers, body) of the response record at ``offset`` (``length`` bytes) of ``warc_file``
    in ``archive``; raises :class:`ArchiveReadError`."""
    _status, headers, body = read_stored(archive, warc_file, offset, length)
    return headers, body


def read_stored(archive: Folder, warc_file: str, offset: int,
                length: int) -> tuple[str, list[tuple[str, str]], bytes]:
    """Like :func:`read_response`, with the stored status line first (``HTTP/1.1 200 OK``)."""
    where = _where(archive, warc_file)
    try:
        data = archive.read_range(warc_file, offset, length)
    except OSError as err:
        raise ArchiveReadError(f"cannot read {where}: {err.strerror or err}") from None
    if len(data) != length:
        raise ArchiveReadError(f"{where} ends before the record at offset {offset} (length {length})")
    return _parse(data, where, offset)


def archived_responses(store: CrawlStore, crawl_id: str, urls: Sequence[str] | None = None,
                       latest_only: bool = True) -> Iterator[ArchivedResponse]:
    """The stored responses of the crawl's page versions (of ``urls`` only, if given), read from
    the archive: only versions with a response and a record (failed fetches have none). A page
    that was rendered gives its rendered DOM (its ``conversion`` record) as the body: what its
    parse saw, and what extraction and Markdown see. With
    ``latest_only``, each URL's latest version the crawl produced. Yielded file by file in
    record order (each file opened once), from the store's archive (``store.archive``, which
    :func:`archive_folder` gives for the settings that made the store)."""
    for row, path, member in _members(store, crawl_id, urls, latest_only, rendered=True):
        url, version, crawl, final, status, ctype, fetched, _file, offset, _length = row
        _status, headers, body = _parse(member, path, offset)
        yield ArchivedResponse(url, version, crawl, final, status, ctype, headers, body, fetched)


def archived_records(store: CrawlStore, crawl_id: str, latest_only: bool = False) -> Iterator[tuple[str, int, bytes]]:
    """(URL, version, the record's gzip member as stored) of each archived page version of the
    crawl, file by file in record order: what a WARC export copies byte for byte."""
    for row, _path, member in _members(store, crawl_id, None, latest_only):
        yield row[0], row[1], member


def count_archived(store: CrawlStore, crawl_id: str, latest_only: bool = False) -> int:
    """How many records :func:`archived_records` yields (for a progress bar)."""
    return len(_located(store, crawl_id, None, latest_only))


def _located(store: CrawlStore, crawl_id: str, urls: Sequence[str] | None, latest_only: bool,
             rendered: bool = False) -> list[tuple[Any, ...]]:
    with store.read() as con:
        return pages.archived_versions(con, crawl_id, urls, latest_only, rendered)


def _members(store: CrawlStore, crawl_id: str, urls: Sequence[str] | None,
             latest_only: bool, rendered: bool = False) -> Iterator[tuple[tuple[Any, ...], str, bytes]]:
    by_file: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in _located(store, crawl_id, urls, latest_only, rendered):
        by_file[row[7]].append(row)
    for warc_file, rows in by_file.items():
        where = _where(store.archive, warc_file)
        with contextlib.ExitStack() as stack:
            try:
                file = stack.enter_context(store.archive.open_read(warc_file))
            except OSError as err:
                raise ArchiveReadError(f"cannot read {where}: {err.strerror or err}") from None
            for row in rows:
                yield row, where, _member(file, where, row[8], row[9])


def _where(archive: Folder, warc_file: str) -> str:
    """The file as messages name it: its path, or its ``s3://`` URL."""
    return f"{archive.url.rstrip('/')}/{warc_file}"


def _member(file: BinaryIO, where: str, offset: int, length: int) -> bytes:
    file.seek(offset)
    data = file.read(length)
    if len(data) != length:
        raise ArchiveReadError(f"{where} ends before the record at offset {offset} (length {length})")
    return data


def _parse(member: bytes, path: str, offset: int) -> tuple[str, list[tuple[str, str]], bytes]:
    try:
        kinds = WarcRecordType.response | WarcRecordType.conversion
        for record in ArchiveIterator(io.BytesIO(member), record_types=kinds, parse_http=True):
            if record.record_type == WarcRecordType.conversion:  # a rendered DOM: the body alone
                kind = record.headers.get("Content-Type") or "text/html; charset=utf-8"
                return "HTTP/1.1 200 OK", [("Content-Type", kind)], bytes(record.reader.read())
            if record.http_headers is None:
                break
            return (record.http_headers.status_line or "", list(record.http_headers.to_tuples()),
                    bytes(record.reader.read()))
    except OSError as err:
        raise ArchiveReadError(f"{path} at offset {offset}: not a WARC record ({err})") from None
    raise ArchiveReadError(f"{path} at offset {offset}: no HTTP response record there")
