"""What an alert says: which crawl, what broke, and where in the UI to look.

An :class:`Alert` is plain data built by one of the builders here (a failed run, a failed or
erroring quality check, a stalled crawl) and rendered once as text: the same text is the
``text`` of the Slack-compatible webhook body and the body of the e-mail, whose subject is its
first line. Links are absolute, made from ``CRAWL_UI_URL``: a run is ``/runs/<run_id>`` and an
asset check is ``/assets/<asset>?view=checks&checkDetail=<check>``, the routes of the Dagster UI.
Neighbours: :mod:`.senders` delivers the text, the sensors in ``sensors/alerts.py`` call the builders.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from urllib.parse import quote, urlencode

MAX_LISTED = 10  # crawls or batches named in one alert; the rest are counted


class AlertKind(Enum):
    RUN_FAILED = "run failed"
    CHECK_FAILED = "quality check failed"
    CHECK_ERRORED = "quality check errored"
    CRAWL_STALLED = "crawl stalled"


@dataclass(frozen=True)
class Alert:
    """One alert: its kind, a one-line title, the crawls it concerns, detail lines and links."""

    kind: AlertKind
    title: str
    crawls: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (label, absolute URL)

    @property
    def subject(self) -> str:
        """One line, whatever the title holds (an e-mail header refuses a line break)."""
        return " ".join(f"[crawl-platform] {self.title}".split())

    @property
    def text(self) -> str:
        """Subject, then ``Crawl:``, the details and one ``label: URL`` line per link."""
        lines = [self.subject]
        if self.crawls:
            label = "Crawl" if len(self.crawls) == 1 else "Crawls"
            lines.append(f"{label}: {listing(self.crawls)}")
        lines += self.details
        lines += [f"{label}: {url}" for label, url in self.links]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind.value, "title": self.title, "crawls": list(self.crawls),
                           "details": list(self.details), "links": [list(link) for link in self.links]})

    @classmethod
    def from_json(cls, raw: str) -> Alert:
        """Inverse of :meth:`to_json` (raises ValueError on anything else)."""
        try:
            body = json.loads(raw)
            return cls(AlertKind(body["kind"]), str(body["title"]), tuple(body["crawls"]), tuple(body["details"]),
                       tuple((str(label), str(url)) for label, url in body["links"]))
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not an alert: {raw[:80]!r}") from err


@dataclass(frozen=True)
class UILinks:
    """Absolute links into the Dagster UI at ``base`` (``CRAWL_UI_URL``)."""

    base: str = field(default="http://127.0.0.1:3000")

    def run(self, run_id: str) -> str:
        return f"{self.base.rstrip('/')}/runs/{run_id}"

    def asset_check(self, asset: str, check: str) -> str:
        query = urlencode({"view": "checks", "checkDetail": check})
        return f"{self.base.rstrip('/')}/assets/{quote(asset, safe='')}?{query}"

    def asset(self, asset: str) -> str:
        return f"{self.base.rstrip('/')}/assets/{quote(asset, safe='')}"


def listing(items: Sequence[str]) -> str:
    """``a, b, c`` for up to :data:`MAX_LISTED` items, then ``and N more``."""
    shown = ", ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def crawl_phrase(crawls: Sequence[str]) -> str:
    if not crawls:
        return ""
    return f" (crawl {crawls[0]})" if len(crawls) == 1 else f" ({len(crawls)} crawls)"


def run_failed(links: UILinks, *, job: str, run_id: str, error: str, crawls: Sequence[str],
               partition: str | None = None, retry: str | None = None) -> Alert:
    """A run that failed: its job, the error that failed it, the batch and the run's page."""
    details = [f"What broke: {error}"]
    if partition:
        details.append(f"Batch: {partition}")
    if retry:
        details.append(f"Retry: {retry}")
    return Alert(AlertKind.RUN_FAILED, f"Run failed: {job}{crawl_phrase(crawls)}", tuple(crawls),
                 tuple(details), (("Run", links.run(run_id)),))


def check_failed(links: UILinks, *, run_id: str, failures: Sequence[tuple[str, str, str]],
                 crawls: Sequence[str], batches: Sequence[str]) -> Alert:
    """Quality checks that ran and failed: per check ``(asset, check, what failed)``."""
    names = ", ".join(check for _asset, check, _what in failures)
    details = [f"What broke: {check} on {asset}: {what}" for asset, check, what in failures]
    if batches:
        details.append(f"Batches: {listing(batches)}")
    check_links = [(f"Check {check}", links.asset_check(asset, check)) for asset, check, _what in failures]
    return Alert(AlertKind.CHECK_FAILED, f"Quality check failed: {names}{crawl_phrase(crawls)}", tuple(crawls),
                 tuple(details), (*check_links, ("Run", links.run(run_id))))


def check_errored(links: UILinks, *, run_id: str, checks: Sequence[tuple[str, str]], error: str,
                  crawls: Sequence[str], batches: Sequence[str]) -> Alert:
    """Quality checks that could not run to a result (their run failed): ``(asset, check)`` each."""
    names = ", ".join(check for _asset, check in checks) or "quality checks"
    details = [f"What broke: {error}"]
    if batches:
        details.append(f"Batches: {listing(batches)}")
    check_links = [(f"Check {check}", links.asset_check(asset, check)) for asset, check in checks]
    return Alert(AlertKind.CHECK_ERRORED, f"Quality check errored: {names}{crawl_phrase(crawls)}", tuple(crawls),
                 tuple(details), (*check_links, ("Run", links.run(run_id))))


def crawl_stalled(links: UILinks, *, crawl_id: str, pending: int, idle_minutes: float,
                  last_progress: datetime) -> Alert:
    """A crawl with pending URLs of which none finished for ``idle_minutes``."""
    details = (f"What broke: {pending} URLs pending and none finished for {idle_minutes:.0f} minutes "
               f"(last progress {last_progress:%Y-%m-%d %H:%M:%S} UTC)",)
    return Alert(AlertKind.CRAWL_STALLED, f"Crawl stalled: {crawl_id}", (crawl_id,), details,
                 (("Runs", f"{links.base.rstrip('/')}/runs"), ("Frontier", links.asset("frontier"))))
