"""Reads stored responses back from the raw archive, never from the network.

The fetch steps write every response as a gzip WARC record (:mod:`crawl_platform.archive.writer`)
and ``pages`` keeps each version's ``warc_file`` (relative to :func:`archive_root`),
``warc_offset`` and ``warc_length``: one gzip member, readable alone. :func:`read_response` reads
one record; :func:`archived_responses` streams a crawl's stored responses (the re-parse path of
extraction rules and main-content assets, and ``crawl-platform show`` / ``export``), opening each
WARC file once and seeking from record to record. The records are parsed by fastwarc.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from fastwarc.warc import ArchiveIterator, WarcRecordType

from crawl_platform.config import Settings
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


def archive_root(settings: Settings) -> Path:
    """The folder WARC files live under: CRAWL_ARCHIVE_PATH, or ``archive/`` in CRAWL_LAKE_PATH."""
    return CrawlStore.from_settings(settings).archive_root


def read_response(archive_root: Path, warc_file: str, offset: int, length: int) -> tuple[list[tuple[str, str]], bytes]:
    """(HTTP headers, body) of the response record at ``offset`` (``length`` bytes) of ``warc_file``
    under ``archive_root``; raises :class:`ArchiveReadError`."""
    _status, headers, body = read_stored(archive_root, warc_file, offset, length)
    return headers, body


def read_stored(archive_root: Path, warc_file: str, offset: int,
                length: int) -> tuple[str, list[tuple[str, str]], bytes]:
    """Like :func:`read_response`, with the stored status line first (``HTTP/1.1 200 OK``)."""
    path = archive_root / warc_file
    try:
        with path.open("rb") as file:
            return _parse(_member(file, path, offset, length), path, offset)
    except OSError as err:
        raise ArchiveReadError(f"cannot read {path}: {err.strerror or err}") from None


def archived_responses(store: CrawlStore, crawl_id: str, urls: Sequence[str] | None = None,
                       latest_only: bool = True) -> Iterator[ArchivedResponse]:
    """The stored responses of the crawl's page versions (of ``urls`` only, if given), read from
    the archive: only versions with a response and a record (failed fetches have none). A page
    that was rendered gives its rendered DOM (its ``conversion`` record) as the body: what its
    parse saw, and what extraction and Markdown see. With
    ``latest_only``, each URL's latest version the crawl produced. Yielded file by file in
    record order (each file opened once), from the store's archive (``store.archive_root``, which
    :func:`archive_root` gives for the settings that made the store)."""
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
             latest_only: bool, rendered: bool = False) -> Iterator[tuple[tuple[Any, ...], Path, bytes]]:
    by_file: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in _located(store, crawl_id, urls, latest_only, rendered):
        by_file[row[7]].append(row)
    for warc_file, rows in by_file.items():
        path = store.archive_root / warc_file
        try:
            file = path.open("rb")
        except OSError as err:
            raise ArchiveReadError(f"cannot read {path}: {err.strerror or err}") from None
        with file:
            for row in rows:
                yield row, path, _member(file, path, row[8], row[9])


def _member(file: BinaryIO, path: Path, offset: int, length: int) -> bytes:
    file.seek(offset)
    data = file.read(length)
    if len(data) != length:
        raise ArchiveReadError(f"{path} ends before the record at offset {offset} (length {length})")
    return data


def _parse(member: bytes, path: Path, offset: int) -> tuple[str, list[tuple[str, str]], bytes]:
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
