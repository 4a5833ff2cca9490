"""Groups of a crawl's pages that are copies of each other, landed in the ``near_duplicates`` table.

The ``near_duplicates`` asset calls :func:`find_near_duplicates` after batches landed ``documents``.
It takes a crawl's fetched URLs at their latest version with a 2xx HTML document, and groups:
- **exact** copies: the same ``pages.content_hash`` (status and body) under different URLs;
- **near** copies: ``documents.simhash`` values (:mod:`crawl_platform.parse.simhash`) at most
  ``max_distance`` bits apart, 3 by default (Manku, Jain and Das Sarma, WWW 2007, chose 3 of 64
  bits for 8 billion web pages: the best precision and recall in their study).
Candidates come from the permuted-blocks trick, not from all pairs: the 64 bits are cut into
``max_distance + 1`` blocks, and two hashes within that distance agree on at least one whole block
(pigeonhole), so only hashes that share a block value are compared; documents with one hash are
joined without comparing. Union-find merges the pairs into groups, so a chain of near copies is
one group. Each group's representative is its shortest URL (a printer version or tracking
variant usually adds to the canonical URL); every member row says whether it is an exact copy
of the representative or a near one, and its Hamming distance to it. A crawl's rows are
replaced in one write transaction each time, so the table always holds whole results.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from crawl_platform.parse.simhash import BITS, hamming
from crawl_platform.store import crawls, duplicates
from crawl_platform.store.database import CrawlStore

DEFAULT_MAX_DISTANCE = 3
MAX_DISTANCE_LIMIT = 8  # 9 blocks of 7 bits: beyond that the blocks share values too often to prune


class UnknownCrawlError(ValueError):
    """A crawl id the lake has never registered."""


@dataclass(frozen=True)
class DocumentPrint:
    """What grouping needs of one document version."""

    url: str
    version: int
    content_hash: str
    simhash: int | None


@dataclass(frozen=True)
class GroupMember:
    url: str
    version: int
    kind: str  # "exact": the representative's content_hash; "near": only its SimHash is close
    distance: int | None  # Hamming distance to the representative's SimHash; None if either has none


@dataclass(frozen=True)
class DuplicateGroup:
    members: tuple[GroupMember, ...]  # the representative first, then by URL

    @property
    def representative(self) -> str:
        return self.members[0].url


@dataclass
class NearDuplicateReport:
    """What a run found, summed over its crawls (the asset's metadata)."""

    crawls: list[str] = field(default_factory=list)
    documents: int = 0
    groups: int = 0
    exact_groups: int = 0  # every member an exact copy of the representative
    largest_group: int = 0
    pages_in_groups: int = 0
    seconds: float = 0.0
    snapshot_id: int | None = None


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]  # path halving
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def blocks(max_distance: int) -> list[tuple[int, int]]:
    """(shift, mask) of each of the ``max_distance + 1`` blocks the 64 bits are cut into."""
    n = max_distance + 1
    edges = [BITS * k // n for k in range(n + 1)]
    return [(lo, (1 << (hi - lo)) - 1) for lo, hi in itertools.pairwise(edges)]


def group_duplicates(docs: Sequence[DocumentPrint],
                     max_distance: int = DEFAULT_MAX_DISTANCE) -> list[DuplicateGroup]:
    """Groups of two or more documents, ordered by representative URL; a document is in one group at most."""
    if not 0 <= max_distance <= MAX_DISTANCE_LIMIT:
        raise ValueError(f"max_distance must be between 0 and {MAX_DISTANCE_LIMIT} bits, not {max_distance}")
    sets = _UnionFind(len(docs))
    first_with_hash: dict[str, int] = {}
    first_with_print: dict[int, int] = {}
    for i, doc in enumerate(docs):
        sets.union(i, first_with_hash.setdefault(doc.content_hash, i))
        if doc.simhash is not None:
            sets.union(i, first_with_print.setdefault(doc.simhash, i))
    prints = sorted(first_with_print)
    for shift, mask in blocks(max_distance) if max_distance else []:
        buckets: dict[int, list[int]] = defaultdict(list)
        for value in prints:
            buckets[(value >> shift) & mask].append(value)
        for bucket in buckets.values():
            for k, a in enumerate(bucket):
                for b in bucket[k + 1:]:
                    if hamming(a, b) <= max_distance:
                        sets.union(first_with_print[a], first_with_print[b])
    members: dict[int, list[DocumentPrint]] = defaultdict(list)
    for i, doc in enumerate(docs):
        members[sets.find(i)].append(doc)
    groups = [_group(found) for found in members.values() if len(found) > 1]
    return sorted(groups, key=lambda g: g.representative)


def _group(found: list[DocumentPrint]) -> DuplicateGroup:
    rep = min(found, key=lambda d: (len(d.url), d.url))
    rest = sorted((d for d in found if d is not rep), key=lambda d: d.url)
    return DuplicateGroup(tuple(
        GroupMember(d.url, d.version, "exact" if d.content_hash == rep.content_hash else "near",
                    hamming(d.simhash, rep.simhash) if d.simhash is not None and rep.simhash is not None else None)
        for d in (rep, *rest)))


def crawl_prints(con: Any, crawl_id: str) -> list[DocumentPrint]:
    """The crawl's fetched URLs at their latest version, where that is a 2xx page with a document."""
    rows = duplicates.document_prints(con, crawl_id)
    return [DocumentPrint(url, version, content, simhash) for url, version, content, simhash in rows]


def find_near_duplicates(store: CrawlStore, crawl_ids: Sequence[str] = (),
                         max_distance: int = DEFAULT_MAX_DISTANCE) -> NearDuplicateReport:
    """Group the crawls' documents (every registered crawl when ``crawl_ids`` is empty) and replace
    their rows in ``near_duplicates`` in one snapshot. Raises :class:`UnknownCrawlError` for an id the
    lake does not know, before writing anything."""
    clock = time.perf_counter()
    report = NearDuplicateReport()
    found: dict[str, list[DuplicateGroup]] = {}
    with store.read() as con:
        known = crawls.crawl_ids(con)
        unknown = sorted(set(crawl_ids) - known)
        if unknown:
            raise UnknownCrawlError(f"unknown crawl: {', '.join(unknown)} (crawls in the lake: "
                                    f"{', '.join(sorted(known)) or 'none'})")
        report.crawls = sorted(set(crawl_ids) or known)
        for crawl_id in report.crawls:
            prints = crawl_prints(con, crawl_id)
            report.documents += len(prints)
            found[crawl_id] = group_duplicates(prints, max_distance)
    rows = [(crawl_id, group_id, m.url, m.version, group.representative, m.kind, m.distance)
            for crawl_id, groups in found.items()
            for group_id, group in enumerate(groups, start=1) for m in group.members]
    table = pa.table({name: pa.array([r[k] for r in rows], kind) for k, (name, kind) in enumerate((
        ("crawl_id", pa.string()), ("group_id", pa.int32()), ("url", pa.string()), ("version", pa.int32()),
        ("representative", pa.string()), ("kind", pa.string()), ("distance", pa.int32())))})
    with store.write() as con:
        duplicates.replace_groups(con, report.crawls, table)
    groups = [g for per_crawl in found.values() for g in per_crawl]
    report.groups = len(groups)
    report.exact_groups = sum(all(m.kind == "exact" for m in g.members) for g in groups)
    report.largest_group = max((len(g.members) for g in groups), default=0)
    report.pages_in_groups = sum(len(g.members) for g in groups)
    report.snapshot_id = store.last_snapshot_id
    report.seconds = time.perf_counter() - clock
    return report
