"""The ``pages``, ``documents`` and ``links`` tables: each URL's versions, as landed, and what was read from them.

A URL gets a new ``pages`` version only when its content hash differs from its latest version,
computed set-based in SQL (:func:`land_versions`), so landing the same rows twice adds nothing;
its ``documents`` row and ``links`` rows carry the same ``(url, version)``. The rows come in as
Arrow tables built by the caller (:mod:`crawl_platform.pipeline.landing`), and every function
runs on the connection of the caller's read or write (:meth:`CrawlStore.read`,
:meth:`CrawlStore.write`), so a batch's whole landing is one transaction. :func:`latest_versions`
gives a recrawl the validators and content hash of each URL's latest version.

Finding a URL's latest version reads the ``url`` column of all of ``pages``, which grows with the
lake. A batch reads it once, when its reader works out what to fetch; its landing is then handed
what the reader found (:class:`KnownVersion`, with the snapshot it was read in) and reads only the
rows committed since that snapshot (``ducklake_table_insertions``), falling back to the whole table
for a URL it was not handed, or when maintenance has expired that snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from crawl_platform.store.engine import current_snapshot

if TYPE_CHECKING:  # the lean commands (crawl, status) read the store without importing pyarrow
    import pyarrow as pa


@dataclass(frozen=True)
class LatestVersion:
    """What a recrawl of a URL takes from its latest stored version."""

    content_hash: str | None  # a response with this hash lands no new version: it need not be parsed
    etag: str | None  # the validators of a 200 that sent them, for If-None-Match / If-Modified-Since
    last_modified: str | None
    version: int = 0  # its number (0: none)


@dataclass(frozen=True)
class KnownVersion:
    """A URL's latest version as a reader found it in lake snapshot ``snapshot_id``: ``version`` 0
    (and no ``content_hash``) when the lake had none."""

    snapshot_id: int
    version: int = 0
    content_hash: str | None = None


@dataclass(frozen=True)
class LandedVersions:
    """What :func:`land_versions` inserted: the new ``(url, version)`` pairs, and how many
    ``documents`` and ``links`` rows came with them."""

    versions: pa.Table  # columns url, version
    documents: int
    links: int


def latest_versions(con: duckdb.DuckDBPyConnection, urls: Sequence[str]) -> dict[str, LatestVersion]:
    """The latest version of each of ``urls`` the lake has (one query). Its validators only for a
    200: a 304 to a conditional request would keep an error as the page's latest version."""
    if not urls:
        return {}
    import pyarrow as pa  # noqa: PLC0415 - see TYPE_CHECKING above

    con.register("wanted_urls", pa.table({"url": list(urls)}))
    rows = con.execute(
        """SELECT url, content_hash, etag, last_modified, status, version FROM pages
           WHERE url IN (SELECT url FROM wanted_urls)
           QUALIFY row_number() OVER (PARTITION BY url ORDER BY version DESC) = 1"""
    ).fetchall()
    con.unregister("wanted_urls")
    return {url: LatestVersion(digest, etag if status == 200 else None, modified if status == 200 else None,
                               version)
            for url, digest, etag, modified, status, version in rows}


def versions_since(con: duckdb.DuckDBPyConnection, known: Mapping[str, KnownVersion],
                   urls: Sequence[str]) -> dict[str, tuple[int, str]] | None:
    """The latest ``(version, content_hash)`` of each of ``urls`` (all in ``known``): what ``known``
    says, unless a version committed since its snapshot is newer. Reads only the rows committed
    since the oldest of those snapshots; None when that snapshot has expired (the caller then reads
    the whole table)."""
    if not urls:
        return {}
    latest = {url: (k.version, str(k.content_hash)) for url in urls
              if (k := known[url]).version and k.content_hash is not None}
    since = min(known[url].snapshot_id for url in urls)
    alias = _catalog(con)
    current = current_snapshot(con, alias)
    if current > since:
        if not con.execute(f"SELECT count(*) FROM {alias}.snapshots() WHERE snapshot_id = ?",
                           [since + 1]).fetchone()[0]:  # type: ignore[index]
            return None  # expired by maintenance: the rows since cannot be told apart
        rows = con.execute(
            f"""SELECT url, max(version), arg_max(content_hash, version)
                FROM ducklake_table_insertions('{alias}', 'main', 'pages', ?::BIGINT, ?::BIGINT)
                WHERE url IN (SELECT unnest(?::VARCHAR[])) GROUP BY url""",
            [since + 1, current, list(urls)]).fetchall()
        for url, version, digest in rows:
            if version > latest.get(url, (0, ""))[0]:
                latest[url] = (int(version), str(digest))
    return latest


def _catalog(con: duckdb.DuckDBPyConnection) -> str:
    """The lake's alias, which the store's connections ``USE``."""
    row = con.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


def land_versions(con: duckdb.DuckDBPyConnection, batch_id: str, pages: pa.Table, docs: pa.Table,
                  links: pa.Table, known: Mapping[str, KnownVersion] | None = None) -> LandedVersions:
    """In the caller's write transaction: a new version of each of ``pages`` whose content hash is
    not its URL's latest, with its ``docs`` and ``links`` rows (keyed by ``url``; those of a URL
    that gets no new version are dropped). ``pages`` has the ``pages`` columns but ``version`` and
    ``batch_id``; ``docs`` the ``documents`` columns but ``version``; ``links`` ``url``,
    ``dst_url`` and ``anchor_text``. ``known``: the latest versions a reader found of some of the
    URLs (see :func:`versions_since`); the others' are read from the whole table."""
    import pyarrow as pa  # noqa: PLC0415 - see TYPE_CHECKING above

    urls = list(dict.fromkeys(pages.column("url").to_pylist()))
    vouched = [url for url in urls if known and url in known]
    since = versions_since(con, known, vouched) if known and vouched else None
    # Nothing vouched for, or its snapshot expired: every URL is looked up in the whole table.
    unknown = [url for url in urls if since is None or url not in (known or {})]
    latest = since or {}
    con.register("known_latest", pa.table({
        "url": pa.array(list(latest), pa.string()),
        "v": pa.array([v for v, _ in latest.values()], pa.int32()),
        "h": pa.array([h for _, h in latest.values()], pa.string())}))
    con.register("unknown_urls", pa.table({"url": pa.array(unknown, pa.string())}))
    latest_sql = "SELECT url, v, h FROM known_latest"
    if unknown:  # only then a read of the whole table's url column
        latest_sql += """ UNION ALL SELECT url, max(version), arg_max(content_hash, version)
                          FROM pages WHERE url IN (SELECT url FROM unknown_urls) GROUP BY url"""
    con.register("inc_pages", pages)
    # The lake supports no RETURNING: the new versions are computed first, then inserted.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE new_pages AS
        SELECT i.url, i.crawl_id, (coalesce(l.v, 0) + 1)::INTEGER AS version, i.status, i.fetched_at,
               i.content_hash, i.content_type, i.final_url, ?::VARCHAR AS batch_id, i.error,
               i.content_length, i.elapsed_ms, i.etag, i.last_modified, i.redirect_chain, i.charset,
               i.warc_file, i.warc_offset, i.warc_length, i.rendered, i.render_reason, i.render_error,
               i.render_refused, i.render_warc_file, i.render_warc_offset, i.render_warc_length
        FROM inc_pages i
        LEFT JOIN ({latest_sql}) l USING (url)
        WHERE l.h IS NULL OR l.h <> i.content_hash
        """,
        [batch_id],
    )
    con.unregister("known_latest")
    con.unregister("unknown_urls")
    con.execute(
        """INSERT INTO pages (url, crawl_id, version, status, fetched_at, content_hash, content_type,
                              final_url, batch_id, error, content_length, elapsed_ms, etag, last_modified,
                              redirect_chain, charset, warc_file, warc_offset, warc_length, rendered,
                              render_reason, render_error, render_refused, render_warc_file, render_warc_offset,
                              render_warc_length)
           SELECT * FROM temp.new_pages"""
    )
    new_versions = con.execute("SELECT url, version FROM temp.new_pages").fetch_arrow_table()
    con.execute("DROP TABLE temp.new_pages")
    con.register("new_versions", new_versions)
    con.register("inc_docs", docs)
    con.register("inc_links", links)
    n_docs = con.execute(
        """INSERT INTO documents (url, version, title, text, main_text, language, simhash, extractor,
                                  main_text_error, parse_error, links_truncated)
           SELECT d.url, n.version, d.title, d.text, d.main_text, d.language, d.simhash, d.extractor,
                  d.main_text_error, d.parse_error, d.links_truncated
           FROM inc_docs d JOIN new_versions n USING (url)"""
    ).fetchone()
    n_links = con.execute(
        """INSERT INTO links (src_url, src_version, dst_url, anchor_text, batch_id)
           SELECT k.url, n.version, k.dst_url, k.anchor_text, ? FROM inc_links k JOIN new_versions n USING (url)""",
        [batch_id],
    ).fetchone()
    return LandedVersions(new_versions, int(n_docs[0]) if n_docs else 0, int(n_links[0]) if n_links else 0)


def archived_versions(con: duckdb.DuckDBPyConnection, crawl_id: str, urls: Sequence[str] | None,
                      latest_only: bool, rendered: bool = False) -> list[tuple[Any, ...]]:
    """The crawl's page versions with a response and an archive record (of ``urls`` only, if
    given; each URL's latest only, with ``latest_only``), by WARC file and offset: ``(url,
    version, crawl_id, final_url, status, content_type, fetched_at, warc_file, warc_offset,
    warc_length)``, the final URL the URL itself when there was no redirect. With ``rendered``, a
    rendered page's record is its rendered DOM's (``render_warc_*``) rather than its response's."""
    where = ("coalesce(render_warc_file, warc_file) AS wf, coalesce(render_warc_offset, warc_offset) AS wo, "
             "coalesce(render_warc_length, warc_length) AS wl" if rendered
             else "warc_file AS wf, warc_offset AS wo, warc_length AS wl")
    sql = f"""SELECT url, version, crawl_id, coalesce(final_url, url), status, content_type, fetched_at, {where}
             FROM pages WHERE crawl_id = ? AND status IS NOT NULL AND warc_file IS NOT NULL"""
    params: list[object] = [crawl_id]
    if urls is not None:
        sql += " AND list_contains(?, url)"
        params.append(list(urls))
    if latest_only:
        sql += " QUALIFY row_number() OVER (PARTITION BY url ORDER BY version DESC) = 1"
    return con.execute(sql + " ORDER BY wf, wo", params).fetchall()


def stored_version(con: duckdb.DuckDBPyConnection, url: str, crawl_id: str | None = None,
                   version: int | None = None) -> tuple[Any, ...] | None:
    """``(version, crawl_id, status, error, fetched_at, warc_file, warc_offset, warc_length)`` of
    the URL's latest version (the latest ``crawl_id`` fetched, if given; ``version``, if given);
    None when there is none."""
    sql = "SELECT version, crawl_id, status, error, fetched_at, warc_file, warc_offset, warc_length FROM pages"
    sql += " WHERE url = ?"
    params: list[object] = [url]
    if crawl_id:
        sql += " AND crawl_id = ?"
        params.append(crawl_id)
    if version is not None:
        sql += " AND version = ?"
        params.append(version)
    rows = con.execute(sql + " ORDER BY version DESC LIMIT 1", params).fetchall()
    return rows[0] if rows else None
