"""Writes a fetch shard's responses to the raw archive as one gzip WARC file.

:class:`WarcFile` is what :class:`~crawl_platform.pipeline.batch.ShardFetcher` uses after a
shard's fetch: a ``warcinfo`` record first, then per response a ``request`` and a ``response``
record (WARC/1.1, each its own gzip member, written by fastwarc; a redirect chain's hops each get
theirs, in order, before the final response's), and the
:class:`RecordPointer` of each response record, which landing stores in ``pages.warc_*`` and
:mod:`crawl_platform.archive.reader` reads back. The archive is a
:class:`~crawl_platform.storage.Folder`: a local folder, where the file is written under a
temporary name and renamed into place once complete and fsynced, or object storage, where it is
written to a local temporary file and uploaded (in parts) when complete; either way it appears
whole before any row points into it. Every file name is new (the batch, the shard and a random
part), so a retried or repeated fetch step never overwrites a file that landed rows point into;
a failed attempt leaves at most an unreferenced ``.part``.
Each result's records are compressed into memory first and appended whole, so a result that
cannot be written is left out of the file, with its reason, and the others are archived; only a
failure of the file itself (a full disk) fails the shard.
The stored body is the decoded one the parser saw, so the stored headers say so:
``Content-Encoding`` and ``Transfer-Encoding`` are kept as ``X-Crawl-Original-*`` and
``Content-Length`` is the stored body's length.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from fastwarc.stream_io import GzipWriter
from fastwarc.warc import WarcRecord, WarcRecordType

from crawl_platform.fetch.fetcher import FetchResult
from crawl_platform.fetch.transport import Exchange
from crawl_platform.storage import Folder

# gzip level of every record: level 3 costs well under half of level 6's CPU for an archive barely
# larger; level 1 is cheaper still but makes a much larger archive (measured by
# benchmarks/archive_cost.py).
COMPRESSION_LEVEL = 3
_REWRITTEN = frozenset({"content-encoding", "transfer-encoding"})
_UNSAFE = re.compile(r"[^A-Za-z0-9.+=_-]")


@dataclass(frozen=True)
class RecordPointer:
    """Where one response record is: the file (relative to the archive root), and the byte offset
    and length of its gzip member."""

    warc_file: str
    offset: int
    length: int
    record_id: str = ""  # its WARC-Record-ID (``<urn:uuid:…>``), for records that refer to it


def shard_file_name(batch_id: str, shard: str, when: datetime | None = None) -> str:
    """A new relative file name, ``YYYY-MM-DD/<batch>-<shard>-<random>.warc.gz``, never used before."""
    day = (when or datetime.now(UTC)).strftime("%Y-%m-%d")
    stem = _UNSAFE.sub("_", f"{batch_id or 'batch'}-{shard or 's0'}")[:120]
    return f"{day}/{stem}-{uuid.uuid4().hex[:12]}.warc.gz"


class WarcFile:
    """One WARC file being written; :meth:`commit` makes it visible, :meth:`discard` removes it."""

    def __init__(self, folder: Folder, name: str, info: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.name = name
        self._staged_file = folder.staged(name)
        self._file = self._staged_file.file
        self._staged = io.BytesIO()  # one result's records, compressed, until they are whole
        self._gzip = GzipWriter(self._staged, compression_level=COMPRESSION_LEVEL)
        fields = {"software": "crawl-platform", "format": "WARC File Format 1.1", **(info or {})}
        self._write(_record(WarcRecordType.warcinfo, _uuid(), datetime.now(UTC),
                            "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode(),
                            "application/warc-fields", {"WARC-Filename": name.rsplit("/", 1)[-1]}))
        self._append()

    def add(self, result: FetchResult) -> RecordPointer | None:
        """Archive the result's redirects, then its final request and response; the pointer of the
        final response record, or None when there was no final response to keep. A result whose
        records cannot be made raises, and leaves nothing of itself in the file."""
        start = self._file.tell()
        try:
            for hop in result.hops:
                if hop.exchange is not None:
                    self._exchange(hop.url, hop.exchange, hop.body, hop.fetched_at)
            pointer = None
            if result.status is not None and result.exchange is not None:
                pointer = self._exchange(result.final_url, result.exchange, result.body, result.fetched_at)
        except Exception:
            self._staged = io.BytesIO()  # the half-made records go, with the writer that holds them
            self._gzip = GzipWriter(self._staged, compression_level=COMPRESSION_LEVEL)
            raise
        self._append()
        return None if pointer is None else RecordPointer(self.name, start + pointer.offset, pointer.length,
                                                          pointer.record_id)

    def _append(self) -> None:
        """Append the staged records to the file."""
        self._file.write(self._staged.getbuffer())
        self._staged.seek(0)
        self._staged.truncate()

    def _exchange(self, url: str, exchange: Exchange, body: bytes, fetched_at: datetime) -> RecordPointer:
        """A request record and its response record, staged; the response record's pointer, its
        offset counted from the start of the staged records."""
        when = fetched_at.replace(tzinfo=UTC)
        target = {"WARC-Target-URI": url}
        response_id = _uuid()
        request = "".join(f"{k}: {v}\r\n" for k, v in exchange.request_headers)
        self._write(_record(WarcRecordType.request, _uuid(), when,
                            f"{exchange.request_line}\r\n{request}\r\n".encode("latin-1", "replace"),
                            "application/http; msgtype=request",
                            {**target, "WARC-Concurrent-To": f"<urn:{response_id.decode()}>"}))
        head = _response_head(exchange.status_line, exchange.response_headers, len(body))
        offset = self._staged.tell()
        self._write(_record(WarcRecordType.response, response_id, when, head + body,
                            "application/http; msgtype=response", target))
        return RecordPointer(self.name, offset, self._staged.tell() - offset, f"<urn:{response_id.decode()}>")

    def add_rendering(self, url: str, dom: bytes, when: datetime, refers_to: RecordPointer | None,
                      screenshot: bytes | None = None) -> RecordPointer:
        """A page's rendered DOM as a ``conversion`` record pointing at its response record (and a
        screenshot as a ``resource`` record pointing at the DOM): the DOM record's pointer."""
        start = self._file.tell()
        dom_id = _uuid()
        refers = {"WARC-Refers-To": refers_to.record_id} if refers_to is not None and refers_to.record_id else {}
        self._write(_record(WarcRecordType.conversion, dom_id, when.replace(tzinfo=UTC), dom,
                            "text/html; charset=utf-8", {"WARC-Target-URI": url, **refers}))
        length = self._staged.tell()
        if screenshot is not None:
            self._write(_record(WarcRecordType.resource, _uuid(), when.replace(tzinfo=UTC), screenshot, "image/png",
                                {"WARC-Target-URI": f"urn:screenshot:{url}",
                                 "WARC-Refers-To": f"<urn:{dom_id.decode()}>"}))
        self._append()
        return RecordPointer(self.name, start, length, f"<urn:{dom_id.decode()}>")

    def copy(self, member: bytes) -> RecordPointer:
        """Append a record already stored as one gzip member, byte for byte (a WARC export)."""
        offset = self._file.tell()
        self._file.write(member)
        return RecordPointer(self.name, offset, len(member))

    @property
    def size(self) -> int:
        return self._file.tell()  # nothing is staged between two calls of add()

    def commit(self) -> None:
        """Make the file visible in its folder, complete (fsynced and renamed, or uploaded) before
        any row points into it."""
        self._gzip.close()
        self._staged_file.commit()

    def discard(self) -> None:
        """Drop an unfinished file (nothing points into it)."""
        self._staged_file.discard()

    def _write(self, record: WarcRecord) -> None:
        record.write(self._gzip, checksum_data=True)
        self._gzip.finish()  # ends the gzip member: each record is readable alone at its offset


def archive_results(folder: Folder, name: str, results: Iterable[FetchResult],
                    info: dict[str, str] | None = None) -> tuple[dict[str, RecordPointer], dict[str, str]]:
    """Write every response among ``results``, redirects included, into the new file ``name`` of
    ``folder``: the pointer of each archived final response by its URL, and why each result
    that could not be archived was not (it is left out; the others are in the file). Writes no
    file when none had a response; raises when the file itself cannot be written."""
    with_response = [r for r in results if (r.status is not None and r.exchange is not None) or r.hops]
    if not with_response:
        return {}, {}
    warc = WarcFile(folder, name, info)
    pointers: dict[str, RecordPointer] = {}
    failed: dict[str, str] = {}
    try:
        for result in with_response:
            try:
                pointer = warc.add(result)
            except OSError:
                raise
            except Exception as err:  # this response's failure, not the file's
                failed[result.url] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
                continue
            if pointer is not None:
                pointers[result.url] = pointer
        warc.commit()
    except BaseException:
        warc.discard()
        raise
    return pointers, failed


def _response_head(status_line: str, headers: Iterable[tuple[str, str]], body_length: int) -> bytes:
    lines = [status_line]
    for key, value in headers:
        lower = key.lower()
        if lower in _REWRITTEN:
            lines.append(f"X-Crawl-Original-{key}: {value}")
        elif lower == "content-length":
            if value.strip() != str(body_length):
                lines.append(f"X-Crawl-Original-{key}: {value}")
        else:
            lines.append(f"{key}: {value}")
    lines.append(f"Content-Length: {body_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def _record(kind: WarcRecordType, record_id: bytes, when: datetime, content: bytes, content_type: str,
            extra: dict[str, str]) -> WarcRecord:
    record = WarcRecord()
    record.init_headers(kind, record_id)
    record.headers.set("WARC-Date", when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    record.headers.append("Content-Type", content_type)
    for key, value in extra.items():
        record.headers.append(key, value)
    record.set_bytes_content(content)
    return record


def _uuid() -> bytes:
    return f"uuid:{uuid.uuid4()}".encode()
