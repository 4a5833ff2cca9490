"""Crawl control on the bus: commands onto the control topic, and a topic range applied to the store.

``crawl-platform cancel|pause|resume`` and the Launchpad control jobs build a
:class:`~crawl_platform.bus.messages.CrawlControl` and put it on the control topic (keyed by crawl
id, so one crawl's commands stay in order). The control sensor hands each new offset range to a
run that applies it with :class:`ControlIntake`, the way the seeds sensor hands crawl requests to
the intake; the CLI also applies its command itself where it reaches the lake, as ``crawl``
registers its crawl, and the run then finds it applied (applying is idempotent and ignores stale
commands, :mod:`crawl_platform.frontier.control`). A command that does not decode, names an unknown
crawl or is refused by the crawl's state goes to the dead-letter topic with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import get_args

from crawl_platform.bus.base import Bus, BusError
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import (
    ControlAction,
    CrawlControl,
    DeadLetter,
    MessageDecodeError,
    crawl_id_problem,
    decode_crawl_control,
)
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.bus.publishing import publish_crawl_control, publish_dead_letters
from crawl_platform.config import Settings
from crawl_platform.frontier.control import ControlOutcome, ControlRefusedError, UnknownCrawlError
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.submission import OUT_OF_REACH
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import one_line

ACTIONS: tuple[ControlAction, ...] = get_args(ControlAction)


def build_control(crawl_id: str, action: str) -> CrawlControl:
    """A command issued now; raises ValueError with a one-line reason on a bad action or id."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if not crawl_id.strip():
        raise ValueError("give the id of the crawl")
    problem = crawl_id_problem(crawl_id.strip())
    if problem is not None:
        raise ValueError(problem)
    return CrawlControl(crawl_id.strip(), action, time.time())


def submit_control(bus: Bus, command: CrawlControl) -> None:
    """Put a command on the control topic (raises BusError if the broker refuses it)."""
    bus.ensure_topics()
    if not publish_crawl_control(bus, command):
        raise BusError(f"the broker did not confirm the {command.action} of crawl {command.crawl_id}")


@dataclass
class ControlReport:
    outcomes: list[ControlOutcome] = field(default_factory=list)
    dead_letters: int = 0


class ControlIntake:
    """Applies the control commands of one offset range of the control topic, in offset order."""

    def __init__(self, bus: Bus, store: CrawlStore) -> None:
        self.bus = bus
        self.frontier = Frontier(store, bus)

    @classmethod
    def from_settings(cls, settings: Settings) -> ControlIntake:
        return cls(KafkaBus.from_settings(settings), CrawlStore.from_settings(settings))

    def apply(self, offsets: OffsetRange) -> ControlReport:
        """Apply the range's commands in order. One that cannot be applied for any reason of its
        own goes to the dead-letter topic with the reason, and the next is taken; the lake or the
        broker out of reach fails the whole range, which is applied again (applying is idempotent)."""
        report = ControlReport()
        letters = []
        for rec in self.bus.read_range(self.bus.control_topic, offsets):
            try:
                report.outcomes.append(self.frontier.control(decode_crawl_control(rec.value)))
            except OUT_OF_REACH:
                raise
            except Exception as err:  # any command that cannot be applied is a dead letter
                expected = isinstance(err, MessageDecodeError | UnknownCrawlError | ControlRefusedError)
                reason = str(err) if expected else f"{type(err).__name__}: {err}"
                letters.append(DeadLetter.for_payload(one_line(reason), self.bus.control_topic, rec.partition,
                                                      rec.offset, rec.value or b""))
        if letters:
            publish_dead_letters(self.bus, letters)
        report.dead_letters = len(letters)
        return report
