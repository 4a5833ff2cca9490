"""What the lake command tests share: a lake filled through the engine, its fingerprints, the
command line in this process or as a subprocess."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from crawl_platform.archive.writer import archive_results, shard_file_name
from crawl_platform.bus.messages import FrontierURL
from crawl_platform.config import Settings
from crawl_platform.dedup.near_duplicates import find_near_duplicates
from crawl_platform.extract.engine import Extractor, PageBody
from crawl_platform.extract.records import land_extractions
from crawl_platform.extract.rules import parse_rules
from crawl_platform.fetch.transport import Exchange
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.markdown.documents import land_markdown
from crawl_platform.parse.html import parse_html
from crawl_platform.pipeline.batch import expand_batch
from crawl_platform.pipeline.landing import LandedBatch, land_batch
from crawl_platform.pipeline.page_events import PageEventPublisher
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.hosts import HostRecord
from crawl_platform.store.location import LakeLocation
from crawl_platform.store.transfer import TableFingerprint, table_fingerprints
from crawl_platform_dagster.cli import main
from tests.unit.crawl_rows import crawl_request, fetch_result, page_html

SITE = "http://site.example"
TITLE_RULES = parse_rules("fields: {title: {selector: 'css:title', required: true}}")


def land_pages(store: CrawlStore, frontier: Frontier, crawl_id: str, batch_id: str, paths: list[str]) -> LandedBatch:
    """Register ``crawl_id`` (once), land one batch fetching ``paths`` of the site, expand it and
    extract its records (the bodies as fetched): every crawl table gets rows (page events recorded;
    the crawl is recurring, so crawl_schedules too)."""
    urls = [f"{SITE}{p}" for p in paths]
    # The same request each time: a registered crawl id takes no other seeds.
    frontier.register(dataclasses.replace(crawl_request(crawl_id, f"{SITE}/"), every_seconds=3600))
    results = {u: fetch_result(u, page_html(f"{crawl_id} {u}", f"{SITE}/next{p}"))
               for u, p in zip(urls, paths, strict=True)}
    parsed = {u: parse_html(r.body, r.final_url, r.content_type) for u, r in results.items()}
    landed = land_batch(store, batch_id, [FrontierURL(crawl_id, u, 0) for u in urls], results, parsed,
                        hosts=[HostRecord(SITE, delay_ms=250)])
    expand_batch(frontier, batch_id, PageEventPublisher(store, frontier.bus))
    versions = dict(store.query("SELECT url, max(version) FROM pages WHERE list_contains(?, url) GROUP BY url", [urls]))
    extractor = Extractor(TITLE_RULES)
    land_extractions(store, crawl_id, TITLE_RULES,
                     [extractor.extract(PageBody(u, versions[u], r.body)) for u, r in results.items()])
    return landed


def land_copies(store: CrawlStore, frontier: Frontier, crawl_id: str, batch_id: str) -> None:
    """Register ``crawl_id`` and land two URLs with the very same page, archived as a batch run
    archives them, then group the crawl's copies and extract its Markdown: the ``near_duplicates``
    and ``documents_markdown`` tables get rows, and the archive a WARC file."""
    urls = [f"{SITE}/copy/a", f"{SITE}/copy/b"]
    frontier.register(crawl_request(crawl_id, *urls))
    page = page_html("The same page served under two URLs, archived once for each of them")
    results = {u: replace(fetch_result(u, page), exchange=Exchange(
        f"GET {u[len(SITE):]} HTTP/1.1", (("Host", "site.example"),), "HTTP/1.1 200 OK",
        (("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(page)))))) for u in urls}
    archived, _failed = archive_results(store.archive, shard_file_name(batch_id, "s0"), results.values())
    parsed = {u: parse_html(r.body, r.final_url, r.content_type) for u, r in results.items()}
    land_batch(store, batch_id, [FrontierURL(crawl_id, u, 0) for u in urls], results, parsed, archived=archived)
    frontier.expand(batch_id)
    find_near_duplicates(store, [crawl_id])
    assert land_markdown(store, [crawl_id]).extracted == 2


def fingerprints(store: CrawlStore) -> dict[str, TableFingerprint]:
    with store.read() as con:
        return table_fingerprints(con)


def lake_at(path: Path) -> CrawlStore:
    return CrawlStore(LakeLocation.from_settings(Settings(lake_path=path)))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """``crawl-platform ARGV`` in this process: exit code, stdout, non-blank stderr lines."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, [line for line in out.err.splitlines() if line.strip()]


def cli(settings: Settings, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``crawl-platform ARGV`` as a subprocess, its output to a pipe."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "crawl_platform_dagster.cli", *argv], input=stdin,
                          env={**base, **settings.to_env()}, cwd=settings.lake_path.parent,
                          capture_output=True, text=True, timeout=120, check=False)
