"""Extraction in a child process with a deadline per page (crawl_platform.extract.bounded): a selector
too slow for one page, or a child that dies, is that page's error and the next pages extract."""

from __future__ import annotations

import os
import signal
import time

import pytest

from crawl_platform.extract.bounded import BoundedExtractor
from crawl_platform.extract.engine import Extractor, PageBody
from crawl_platform.extract.rules import parse_rules

# Quadratic in the page's elements: instant on a small page, minutes on one of 20,000 elements.
SLOW_ON_BIG_PAGES = parse_rules("fields: {title: 'css:h1', many: {selector: 'xpath:count(//*[count(//*) > 1])', "
                                "type: int}}")


def _page(url: str, divs: int) -> PageBody:
    body = f"<html><body><h1>{url}</h1>{'<div><p>x</p></div>' * divs}</body></html>".encode()
    return PageBody(url, 1, body)


@pytest.mark.timing
def test_a_page_too_slow_for_a_selector_is_its_error_and_the_next_pages_extract():
    pages = [_page("http://a.example/1", 2), _page("http://a.example/big", 20_000), _page("http://a.example/3", 3)]
    started = time.perf_counter()
    with BoundedExtractor(SLOW_ON_BIG_PAGES, page_seconds=1.0) as bounded:
        first, big, third = (bounded.extract(p) for p in pages)
    assert time.perf_counter() - started < 10  # the big page alone would take minutes
    assert [r.values for r in first.records] == [{"title": "http://a.example/1", "many": 7}]
    assert (big.records, big.error) == ((), "extraction stopped after 1 s: a selector too slow for this page")
    assert [r.values for r in third.records] == [{"title": "http://a.example/3", "many": 9}]
    assert bounded.fallback == ""


def test_the_records_are_the_engines_and_a_child_that_dies_is_one_pages_error():
    rules = parse_rules("fields: {title: 'css:h1', count: {selector: 'xpath:count(//p)', type: int}}")
    page = _page("http://a.example/1", 4)
    with BoundedExtractor(rules) as bounded:
        assert bounded.extract(page) == Extractor(rules).extract(page)
        os.kill(bounded.pid, signal.SIGKILL)  # as the kernel's OOM killer would
        time.sleep(0.2)
        died = bounded.extract(page)
        assert (died.records, died.error) == ((), "extraction failed: its process died (exit code -9)")
        assert bounded.extract(page) == Extractor(rules).extract(page)  # a new child
    assert bounded.pid is None
