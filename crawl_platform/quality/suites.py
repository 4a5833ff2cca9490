"""Data-quality rules for the ``pages`` and ``documents`` tables, run as Great Expectations suites.

Each crawl batch lands rows in DuckDB (see ``schema.sql``); the Dagster asset checks in
``assets/checks.py`` read that batch's rows into a DataFrame (:func:`read_pages`,
:func:`read_documents`, through :mod:`crawl_platform.store.check_rows`) and call
:func:`validate_pages` or :func:`validate_documents` here. This module owns the rules and turns Great Expectations'
results into the small frozen :class:`SuiteResult` / :class:`ExpectationOutcome` values the
Dagster layer reports as check metadata. It never imports Dagster, and Great Expectations is
imported lazily on the first non-empty validation because importing it costs seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawl_platform.store import check_rows

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.data_context.data_context.ephemeral_data_context import (
        EphemeralDataContext,
    )
    from great_expectations.datasource.fluent.pandas_datasource import PandasDatasource

SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"
# How many offending values each failed expectation quotes in its details; enough to see the
# problem without turning Dagster metadata into a data dump.
_SAMPLE_SIZE = 5
# Meta key tagging each GX expectation with its rule's index in the suite.
_META_KEY = "crawl_platform_rule"


@dataclass(frozen=True)
class ExpectationOutcome:
    """How one expectation of a suite fared on one batch of rows."""

    expectation: str  # Great Expectations type, e.g. "expect_column_values_to_not_be_null"
    column: str | None  # None for multi-column expectations (their columns are named in details)
    success: bool
    unexpected_count: int
    details: str

    @property
    def label(self) -> str:
        """A key unique within a suite, e.g. ``expect_column_values_to_be_between[status]``."""
        return f"{self.expectation}[{self.column}]" if self.column else self.expectation


@dataclass(frozen=True)
class SuiteResult:
    """The outcome of one suite on one DataFrame; ``success`` only if every expectation held."""

    suite: str
    success: bool
    row_count: int
    outcomes: tuple[ExpectationOutcome, ...]

    @property
    def failed(self) -> tuple[ExpectationOutcome, ...]:
        """The outcomes that did not hold, in suite order."""
        return tuple(o for o in self.outcomes if not o.success)


@dataclass(frozen=True)
class _Rule:
    """One expectation as plain data, so the rules are readable without importing GX."""

    expectation: str  # GX snake_case type; the class name is its CamelCase form
    description: str  # what the rule means, in words, quoted in the outcome's details
    column: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    # Restricts the rule to rows where this column is null (GX row_condition). This is how
    # "status may be null only when error is set" is said: status not null where error is null.
    only_where_null: str | None = None


def _not_null(column: str) -> _Rule:
    return _Rule("expect_column_values_to_not_be_null", f"{column} is not null", column)


def _unique_url_version() -> _Rule:
    return _Rule(
        "expect_compound_columns_to_be_unique",
        "(url, version) is unique",
        kwargs={"column_list": ["url", "version"]},
    )


def _version_positive() -> _Rule:
    return _Rule("expect_column_values_to_be_between", "version >= 1", "version", {"min_value": 1})


PAGES_RULES: tuple[_Rule, ...] = (
    _not_null("url"),
    _unique_url_version(),
    _version_positive(),
    # Between-expectations skip nulls, which is exactly "100..599 or null".
    _Rule(
        "expect_column_values_to_be_between",
        "status is 100..599 or null",
        "status",
        {"min_value": 100, "max_value": 599},
    ),
    _Rule(
        "expect_column_values_to_not_be_null",
        "status is null only when error is set",
        "status",
        only_where_null="error",
    ),
    _not_null("content_hash"),
    _Rule(
        "expect_column_values_to_match_regex",
        "content_hash is 64 lowercase hex digits",
        "content_hash",
        {"regex": SHA256_HEX_PATTERN},
    ),
    _not_null("fetched_at"),
    _not_null("batch_id"),
)

DOCUMENTS_RULES: tuple[_Rule, ...] = (
    _not_null("url"),
    _unique_url_version(),
    _not_null("text"),
    _version_positive(),
)


class _GxRunner:
    """One ephemeral GX context with a pandas data source; suites are built once per name.

    Building the context and the suites is the slow part after the import, so one runner per
    process serves every batch. GX objects are not documented as thread-safe, hence the lock.
    """

    def __init__(self) -> None:
        # Lazy: importing GX takes seconds, and only a non-empty validation needs it.
        import great_expectations as gx  # noqa: PLC0415
        from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: PLC0415

        self._gx = gx
        self._context: EphemeralDataContext = gx.get_context(mode="ephemeral")
        # tqdm bars would spam Dagster's captured stderr once per validation.
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self._source: PandasDatasource = self._context.data_sources.add_pandas("crawl_store")
        self._batches: dict[str, BatchDefinition[Any]] = {}
        self._suites: dict[str, ExpectationSuite] = {}
        self._lock = threading.Lock()

    def _suite(self, name: str, rules: Sequence[_Rule]) -> ExpectationSuite:
        suite = self._suites.get(name)
        if suite is None:
            expectations = [_to_gx(rule, index) for index, rule in enumerate(rules)]
            suite = self._gx.ExpectationSuite(name=name, expectations=expectations)
            self._suites[name] = suite
        return suite

    def _batch_definition(self, name: str) -> BatchDefinition[Any]:
        batch_definition = self._batches.get(name)
        if batch_definition is None:
            asset = self._source.add_dataframe_asset(name)
            batch_definition = asset.add_batch_definition_whole_dataframe(f"{name}_whole")
            self._batches[name] = batch_definition
        return batch_definition

    def validate(self, name: str, rules: Sequence[_Rule], df: pd.DataFrame) -> list[Any]:
        """Run the suite on ``df``; returns GX's per-expectation results, in rule order."""
        with self._lock:
            suite = self._suite(name, rules)
            batch = self._batch_definition(name).get_batch(batch_parameters={"dataframe": df})
            result = batch.validate(
                suite,
                result_format={"result_format": "BASIC", "partial_unexpected_count": _SAMPLE_SIZE},
            )
        # GX lists expectations whose metrics raised before the others, so results are matched
        # back to rules by the index each expectation carries in its meta, not by position.
        by_index = {_rule_index(r): r for r in result.results}
        missing = [i for i in range(len(rules)) if i not in by_index]
        if missing:
            raise RuntimeError(f"suite {name}: GX returned no result for rules {missing}")
        return [by_index[i] for i in range(len(rules))]


_runner: _GxRunner | None = None
_runner_lock = threading.Lock()


def _get_runner() -> _GxRunner:
    global _runner  # noqa: PLW0603 - a lazy per-process singleton is the point
    with _runner_lock:
        if _runner is None:
            _runner = _GxRunner()
        return _runner


def _rule_index(gx_result: Any) -> int | None:
    config = gx_result.expectation_config
    meta = (config.meta if config is not None else None) or {}
    index = meta.get(_META_KEY)
    return index if isinstance(index, int) else None


def _to_gx(rule: _Rule, index: int) -> Any:
    import great_expectations.expectations as gxe  # noqa: PLC0415 - lazy, see _GxRunner
    from great_expectations.expectations.row_conditions import Column  # noqa: PLC0415

    cls = getattr(gxe, "".join(part.capitalize() for part in rule.expectation.split("_")))
    kwargs: dict[str, Any] = {**rule.kwargs, "meta": {_META_KEY: index}}
    if rule.column is not None:
        kwargs["column"] = rule.column
    if rule.only_where_null is not None:
        kwargs["row_condition"] = Column(rule.only_where_null).is_null()
    return cls(**kwargs)


def _outcome(rule: _Rule, gx_result: Any) -> ExpectationOutcome:
    exception_message = _exception_message(gx_result.exception_info)
    stats: Mapping[str, Any] = gx_result.result or {}
    unexpected = int(stats.get("unexpected_count") or 0)
    if exception_message is not None:
        # GX reports e.g. a missing column as a failed result carrying the exception.
        details = f"{rule.description}: could not evaluate: {exception_message}"
    elif gx_result.success:
        details = f"{rule.description}: ok"
    else:
        details = f"{rule.description}: {unexpected} of {stats.get('element_count', '?')} rows unexpected"
        sample = stats.get("partial_unexpected_list") or []
        # A not-null rule's offending values are all null; quoting them says nothing.
        if sample and rule.expectation != "expect_column_values_to_not_be_null":
            details += f"; e.g. {sample[:_SAMPLE_SIZE]!r}"
    return ExpectationOutcome(
        expectation=rule.expectation,
        column=rule.column,
        success=bool(gx_result.success),
        unexpected_count=unexpected,
        details=details,
    )


def _exception_message(info: Any) -> str | None:
    # exception_info is either one {raised_exception, exception_message, ...} dict or, when a
    # metric failed, a dict of such dicts keyed by metric id.
    if not isinstance(info, Mapping):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for nested in info.values():
        if isinstance(nested, Mapping) and nested.get("raised_exception"):
            return str(nested.get("exception_message"))
    return None


def _validate(name: str, rules: Sequence[_Rule], df: pd.DataFrame) -> SuiteResult:
    row_count = len(df)
    if row_count == 0:
        # Nothing can violate a row rule; skipping GX also spares an empty batch the GX import
        # and copes with a frame that has no columns at all.
        outcomes = tuple(
            ExpectationOutcome(r.expectation, r.column, True, 0, f"{r.description}: no rows") for r in rules
        )
        return SuiteResult(name, True, 0, outcomes)
    gx_results = _get_runner().validate(name, rules, df)
    outcomes = tuple(_outcome(r, g) for r, g in zip(rules, gx_results, strict=True))
    return SuiteResult(name, all(o.success for o in outcomes), row_count, outcomes)


def validate_pages(df: pd.DataFrame) -> SuiteResult:
    """Validate rows of the ``pages`` table (any subset, typically one batch)."""
    return _validate("pages", PAGES_RULES, df)


def validate_documents(df: pd.DataFrame) -> SuiteResult:
    """Validate rows of the ``documents`` table (any subset, typically one batch)."""
    return _validate("documents", DOCUMENTS_RULES, df)


# For suites built elsewhere (the extraction rules' checks, crawl_platform.extract.checks): a rule,
# and validating a frame with rules. GX builds a suite once per name and process: give new rules a new name.
Rule = _Rule


def validate_frame(suite: str, rules: Sequence[Rule], df: pd.DataFrame) -> SuiteResult:
    """Validate ``df`` with ``rules`` as the suite named ``suite``."""
    return _validate(suite, rules, df)


def rule_columns(rules: Sequence[_Rule]) -> list[str]:
    """The columns ``rules`` look at, each once, in rule order: all a check reads of its table.
    The documents' ``main_text`` and the pages' redirect chains, say, stay on disk (the Parquet
    files are read column by column)."""
    named: list[str] = []
    for rule in rules:
        named += [rule.column] if rule.column else []
        named += list(rule.kwargs.get("column_list", ()))
        named += [rule.only_where_null] if rule.only_where_null else []
    return list(dict.fromkeys(named))


def nullness_only(rules: Sequence[_Rule]) -> set[str]:
    """The columns ``rules`` look at only to see whether they are null (not-null rules, and the
    column a rule's rows are restricted by): a check needs a marker of them, not their values."""
    by_value = set()
    for rule in rules:
        if rule.column and rule.expectation != "expect_column_values_to_not_be_null":
            by_value.add(rule.column)
        by_value.update(rule.kwargs.get("column_list", ()))
    return set(rule_columns(rules)) - by_value


def read_pages(con: duckdb.DuckDBPyConnection, batches: list[str] | None) -> pd.DataFrame:
    """The pages rows of ``batches`` (all rows if None), in the columns the pages rules look at
    (:func:`rule_columns`; those only looked at for nullness as TRUE or NULL)."""
    return check_rows.pages_frame(con, rule_columns(PAGES_RULES), nullness_only(PAGES_RULES), batches)


def read_documents(con: duckdb.DuckDBPyConnection, batches: list[str] | None) -> pd.DataFrame:
    """The documents of ``batches`` (all rows if None), in the columns the documents rules look at."""
    return check_rows.documents_frame(con, rule_columns(DOCUMENTS_RULES), nullness_only(DOCUMENTS_RULES), batches)
