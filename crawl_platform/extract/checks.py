"""The data-quality checks of a crawl's records, as Great Expectations suites with the rules' thresholds.

Two suites per crawl: ``null_rate`` holds each required field NULL in at most
``checks.max_null_rate`` of the records (GX ``expect_column_values_to_not_be_null`` with
``mostly``), and ``type_errors`` holds each int, float, bool or date field failing its type in at
most ``checks.max_type_error_rate`` of them (a ``type:`` note, ``expect_column_values_to_be_null``
on it). A crawl whose pages gave no record at all fails ``null_rate``. The rows come from
``records`` for the crawl's current rules (:mod:`crawl_platform.store.records`); the rules and
Great Expectations (imported lazily, by :mod:`crawl_platform.quality.suites`) are run here, and
the Dagster asset checks in ``assets/records.py`` only report :class:`RecordsCheck`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crawl_platform.extract.records import stored_rules
from crawl_platform.extract.rules import ExtractionRules
from crawl_platform.quality.suites import Rule, SuiteResult, validate_frame
from crawl_platform.store import records
from crawl_platform.store.database import CrawlStore

CheckKind = Literal["null_rate", "type_errors"]
TYPED = frozenset({"int", "float", "bool", "date"})  # the types a value can fail


@dataclass(frozen=True)
class FieldRate:
    """One field's rate in one check: ``rate`` of the records, against ``threshold``."""

    field: str
    rate: float
    count: int
    threshold: float

    @property
    def passed(self) -> bool:
        return self.rate <= self.threshold


@dataclass(frozen=True)
class RecordsCheck:
    """The outcome of one check on one crawl's records."""

    crawl_id: str
    kind: CheckKind
    rules_digest: str
    records: int
    pages: int
    page_errors: int
    rates: tuple[FieldRate, ...]
    suite: SuiteResult
    problem: str | None = None  # a failure that is not a field's rate (no records at all)

    @property
    def passed(self) -> bool:
        return self.problem is None and self.suite.success

    @property
    def summary(self) -> str:
        if self.problem is not None:
            return self.problem
        failed = [r for r in self.rates if not r.passed]
        if not failed:
            return f"{self.kind}: every field within its threshold ({self.records} records)"
        return f"{self.kind}: " + "; ".join(
            f"{r.field} {r.rate:.1%} of {self.records} records > {r.threshold:.1%}" for r in failed)


def _columns(rules: ExtractionRules, kind: CheckKind) -> list[str]:
    if kind == "null_rate":
        return [name for name, rule in rules.fields.items() if rule.required]
    return [name for name, rule in rules.fields.items() if rule.type in TYPED]


def _gx_rules(rules: ExtractionRules, kind: CheckKind) -> list[Rule]:
    if kind == "null_rate":
        mostly = 1 - rules.checks.max_null_rate
        return [Rule("expect_column_values_to_not_be_null", f"{name} is not null in >= {mostly:.1%} of records",
                     name, {"mostly": mostly}) for name in _columns(rules, kind)]
    mostly = 1 - rules.checks.max_type_error_rate
    return [Rule("expect_column_values_to_be_null", f"{name} has its type in >= {mostly:.1%} of records",
                 f"{name}__type_error", {"mostly": mostly}) for name in _columns(rules, kind)]


def check_records(store: CrawlStore, crawl_id: str, kind: CheckKind) -> RecordsCheck:
    """Run one suite on the crawl's records (raises ``UnknownCrawlError`` without rules)."""
    rules = stored_rules(store, crawl_id)
    columns = _columns(rules, kind)
    with store.read() as con:
        df = records.field_frame(con, crawl_id, rules.digest, columns if kind == "null_rate" else [],
                                 columns if kind != "null_rate" else [])
        pages, page_errors = records.page_counts(con, crawl_id, rules.digest)
    gx_rules = _gx_rules(rules, kind)
    # A suite per crawl, rules and kind: GX keeps a built suite by its name for the process.
    name = f"records_{kind}_{crawl_id}_{rules.digest}"
    suite = validate_frame(name, gx_rules, df) if gx_rules else SuiteResult(name, True, len(df), ())
    threshold = rules.checks.max_null_rate if kind == "null_rate" else rules.checks.max_type_error_rate
    rates = tuple(
        FieldRate(name, outcome.unexpected_count / len(df) if len(df) else 0.0, outcome.unexpected_count,
                  threshold)
        for name, outcome in zip(_columns(rules, kind), suite.outcomes, strict=True))
    problem = None
    if kind == "null_rate" and len(df) == 0 and pages:
        problem = f"null_rate: {pages} pages gave no record ({page_errors} with an error)"
    return RecordsCheck(crawl_id, kind, rules.digest, len(df), int(pages), int(page_errors), rates, suite, problem)
