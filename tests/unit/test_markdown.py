"""Markdown and published dates of stored pages (crawl_platform.parse.markdown): a Python docs page
keeps its headings and code and loses its navigation, dates come from meta tags or the URL, and a
body that is no HTML is an error note, not an exception."""

from __future__ import annotations

from datetime import date
from importlib.metadata import version

from crawl_platform.parse.markdown import extract_markdown
from tests.unit.test_main_text import PYTHON_DOCS, pytestmark  # noqa: F401 - skipped without python3.11-doc

EXTRACTOR = f"trafilatura {version('trafilatura')}; htmldate {version('htmldate')}"


def test_a_python_docs_page_becomes_markdown_without_its_navigation():
    doc = extract_markdown((PYTHON_DOCS / "library/json.html").read_bytes(), "http://docs.test/library/json.html")
    assert (doc.extractor, doc.error) == (EXTRACTOR, None)
    assert doc.markdown is not None
    assert doc.markdown.startswith("# `json` — JSON encoder and decoder")
    assert "\n## Basic Usage" in doc.markdown
    assert "Report a Bug" not in doc.markdown
    assert "Previous topic" not in doc.markdown


def test_the_published_date_comes_from_a_meta_tag_or_the_url():
    story = b"<article><p>" + b"A long paragraph of text for the story. " * 10 + b"</p></article>"
    meta = b"<html><head><meta property='article:published_time' content='2024-05-03T10:00:00Z'></head><body>"
    assert extract_markdown(meta + story + b"</body></html>", "http://h/story").published_date == date(2024, 5, 3)
    assert extract_markdown(b"<html><body>" + story + b"</body></html>",
                            "http://h/2023/04/05/story").published_date == date(2023, 4, 5)
    assert extract_markdown(b"<html><body>" + story + b"</body></html>", "http://h/story").published_date is None


def test_a_body_that_is_no_html_is_an_error_note():
    for body in (b"", bytes(range(256)) * 8):
        doc = extract_markdown(body, "http://h/binary")
        assert (doc.markdown, doc.published_date, doc.extractor, doc.error) == (
            None, None, EXTRACTOR, "no HTML document in the body")
