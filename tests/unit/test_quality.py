"""Tests of the Great Expectations suites in crawl_platform.quality.suites.

Each rule of the pages and documents suites is broken on its own in an otherwise good frame, and
the test asserts that exactly that rule fails with the expected unexpected_count. The Dagster
checks that call these suites are tested in tests/dagster/test_checks.py.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from crawl_platform.bus.messages import FrontierURL
from crawl_platform.quality.suites import (
    DOCUMENTS_RULES,
    PAGES_RULES,
    SuiteResult,
    nullness_only,
    read_documents,
    read_pages,
    rule_columns,
    validate_documents,
    validate_pages,
)
from tests.unit.crawl_rows import fetch_result, land, page_html

REPO_ROOT = Path(__file__).resolve().parents[2]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def good_pages() -> pd.DataFrame:
    """Two fetched pages, a second version of one, and a fetch that failed without a response."""
    return pd.DataFrame(
        {
            "url": ["https://a.test/", "https://a.test/x", "https://a.test/x", "https://b.test/"],
            "crawl_id": ["c1"] * 4,
            "version": [1, 1, 2, 1],
            "status": [200, 404, 200, None],
            "fetched_at": pd.to_datetime(["2024-05-01 10:00"] * 4),
            "content_hash": [sha("a"), sha("x1"), sha("x2"), sha("timeout")],
            "content_type": ["text/html", "text/html", "text/html", None],
            "final_url": ["https://a.test/", "https://a.test/x", "https://a.test/x", None],
            "batch_id": ["batch-1"] * 4,
            "error": [None, None, None, "timeout"],
            "content_length": [120, 10, 130, 0],
            "elapsed_ms": [12.5, 3.0, 11.0, 5000.0],
        }
    )


def good_documents() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "url": ["https://a.test/", "https://a.test/x", "https://a.test/x"],
            "version": [1, 1, 2],
            "title": ["A", None, "X"],
            "text": ["hello", "", "x again"],
        }
    )


def set_cell(column: str, value: object, row: int = 0) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def mutate(df: pd.DataFrame) -> pd.DataFrame:
        df = df.astype({column: object})  # so None stays None and 42 fits a float column
        df.loc[row, column] = value
        return df

    return mutate


def duplicate_first_row(df: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([df, df.iloc[[0]]], ignore_index=True)


def only_failure(result: SuiteResult) -> tuple[str, int]:
    assert not result.success
    assert len(result.failed) == 1, [o.details for o in result.failed]
    (failed,) = result.failed
    return failed.label, failed.unexpected_count


def test_good_pages_pass() -> None:
    result = validate_pages(good_pages())
    assert result.success, [o.details for o in result.failed]
    assert result.suite == "pages"
    assert result.row_count == 4
    assert result.failed == ()
    assert all(o.success and o.unexpected_count == 0 for o in result.outcomes)
    assert len(result.outcomes) == 9


@pytest.mark.parametrize(
    ("mutate", "label", "unexpected"),
    [
        (set_cell("url", None), "expect_column_values_to_not_be_null[url]", 1),
        # Both rows of the duplicated pair count as unexpected.
        (duplicate_first_row, "expect_compound_columns_to_be_unique", 2),
        (set_cell("version", 0), "expect_column_values_to_be_between[version]", 1),
        (set_cell("status", 42), "expect_column_values_to_be_between[status]", 1),
        (set_cell("status", 600), "expect_column_values_to_be_between[status]", 1),
        (set_cell("status", None), "expect_column_values_to_not_be_null[status]", 1),
        (set_cell("content_hash", "xyz"), "expect_column_values_to_match_regex[content_hash]", 1),
        (set_cell("content_hash", sha("a").upper()), "expect_column_values_to_match_regex[content_hash]", 1),
        (set_cell("content_hash", None), "expect_column_values_to_not_be_null[content_hash]", 1),
        (set_cell("fetched_at", None), "expect_column_values_to_not_be_null[fetched_at]", 1),
        (set_cell("batch_id", None), "expect_column_values_to_not_be_null[batch_id]", 1),
    ],
    ids=[
        "null-url",
        "duplicate-url-version",
        "version-0",
        "status-42",
        "status-600",
        "null-status-without-error",
        "hash-xyz",
        "hash-uppercase",
        "null-hash",
        "null-fetched_at",
        "null-batch_id",
    ],
)
def test_each_pages_rule_fails_alone(
    mutate: Callable[[pd.DataFrame], pd.DataFrame], label: str, unexpected: int
) -> None:
    result = validate_pages(mutate(good_pages()))
    assert only_failure(result) == (label, unexpected)
    assert result.row_count == len(mutate(good_pages()))


def test_null_status_is_fine_when_error_is_set() -> None:
    df = set_cell("error", "connection refused", row=0)(set_cell("status", None, row=0)(good_pages()))
    assert validate_pages(df).success


def test_failed_outcome_details_quote_the_offending_value() -> None:
    result = validate_pages(set_cell("content_hash", "xyz")(good_pages()))
    (failed,) = result.failed
    assert failed.expectation == "expect_column_values_to_match_regex"
    assert failed.column == "content_hash"
    assert "1 of 4 rows" in failed.details
    assert "'xyz'" in failed.details


def test_several_broken_rules_are_all_reported() -> None:
    df = set_cell("version", 0, row=1)(set_cell("content_hash", "xyz", row=2)(good_pages()))
    result = validate_pages(df)
    assert {o.label: o.unexpected_count for o in result.failed} == {
        "expect_column_values_to_be_between[version]": 1,
        "expect_column_values_to_match_regex[content_hash]": 1,
    }


def test_missing_column_fails_instead_of_raising() -> None:
    result = validate_pages(good_pages().drop(columns=["error"]))
    assert only_failure(result)[0] == "expect_column_values_to_not_be_null[status]"
    assert "could not evaluate" in result.failed[0].details


def test_good_documents_pass() -> None:
    result = validate_documents(good_documents())
    assert result.success, [o.details for o in result.failed]
    assert (result.suite, result.row_count, len(result.outcomes)) == ("documents", 3, 4)


@pytest.mark.parametrize(
    ("mutate", "label", "unexpected"),
    [
        (set_cell("url", None), "expect_column_values_to_not_be_null[url]", 1),
        (duplicate_first_row, "expect_compound_columns_to_be_unique", 2),
        (set_cell("text", None), "expect_column_values_to_not_be_null[text]", 1),
        (set_cell("version", 0), "expect_column_values_to_be_between[version]", 1),
    ],
    ids=["null-url", "duplicate-url-version", "null-text", "version-0"],
)
def test_each_documents_rule_fails_alone(
    mutate: Callable[[pd.DataFrame], pd.DataFrame], label: str, unexpected: int
) -> None:
    assert only_failure(validate_documents(mutate(good_documents()))) == (label, unexpected)


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame(),
        good_pages().iloc[0:0],
        good_documents().iloc[0:0],
    ],
    ids=["no-columns", "pages-columns", "documents-columns"],
)
@pytest.mark.parametrize("validate", [validate_pages, validate_documents])
def test_empty_frame_passes(frame: pd.DataFrame, validate: Callable[[pd.DataFrame], SuiteResult]) -> None:
    result = validate(frame)
    assert result.success
    assert result.row_count == 0
    assert result.outcomes
    assert all(o.success and o.unexpected_count == 0 for o in result.outcomes)


def test_import_does_not_load_great_expectations() -> None:
    # GX costs seconds to import; loading the Dagster definitions must not pay for it.
    code = "import sys, crawl_platform.quality.suites; assert 'great_expectations' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)


def test_the_checks_read_only_the_columns_their_rules_look_at(store) -> None:
    urls = ["http://a.example/", "http://a.example/x"]
    land(store, "batch-1", [FrontierURL("c", url, 0) for url in urls],
         [fetch_result(url, page_html(url, "/y")) for url in urls])
    assert rule_columns(PAGES_RULES) == ["url", "version", "status", "error", "content_hash", "fetched_at", "batch_id"]
    assert rule_columns(DOCUMENTS_RULES) == ["url", "version", "text"]
    # Of these, the checks only ask whether they are null: they read TRUE or NULL, not the texts.
    assert nullness_only(PAGES_RULES) == {"error", "fetched_at", "batch_id"}
    assert nullness_only(DOCUMENTS_RULES) == {"text"}
    for read, rules in ((read_pages, PAGES_RULES), (read_documents, DOCUMENTS_RULES)):
        for batches in (None, ["batch-1"]):
            with store.read() as con:  # a real lake, read as the checks' resource reads it
                frame = read(con, batches)
            assert list(frame.columns) == rule_columns(rules)
            assert sorted(frame["url"]) == urls
            assert all(set(frame[column].dropna()) <= {True} for column in nullness_only(rules))
            assert frame["fetched_at" if rules is PAGES_RULES else "text"].notna().all()
            assert validate_pages(frame).success if rules is PAGES_RULES else validate_documents(frame).success
