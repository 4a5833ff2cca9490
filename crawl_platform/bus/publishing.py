"""Typed messages onto the bus: the codec, the topic and the key of each kind of message.

A frontier URL is keyed by its host, so one frontier partition owns a host's politeness (equal
keys always land in one partition); a crawl request and a control command are keyed by their crawl
id (one crawl's commands stay in order), a page event by its URL; a dead letter has no key. Works
with any :class:`crawl_platform.bus.base.Bus`.
"""

from __future__ import annotations

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import CrawlControl, CrawlRequest, DeadLetter, FrontierURL, PageEvent, encode
from crawl_platform.urls import host_of


def publish_frontier(bus: Bus, urls: list[FrontierURL]) -> list[bool]:
    """Publish URLs keyed by host; one acknowledgement flag per URL (see :meth:`Bus.publish`)."""
    return bus.publish(bus.frontier_topic, ((host_of(u.url).encode(), encode(u)) for u in urls))


def publish_dead_letters(bus: Bus, letters: list[DeadLetter]) -> list[bool]:
    """Put messages that could not be processed on the dead-letter topic, with their reasons."""
    return bus.publish(bus.dead_letter_topic, ((None, encode(d)) for d in letters))


def publish_crawl_request(bus: Bus, request: CrawlRequest) -> bool:
    """Put one crawl request on the seeds topic; True once the broker confirmed it."""
    return all(bus.publish(bus.seeds_topic, [(request.crawl_id.encode(), encode(request))]))


def publish_page_events(bus: Bus, events: list[PageEvent]) -> list[bool]:
    """Put page events on the pages topic keyed by URL (a URL's versions stay in order)."""
    return bus.publish(bus.pages_topic, ((e.url.encode(), encode(e)) for e in events))


def publish_crawl_control(bus: Bus, command: CrawlControl) -> bool:
    """Put one control command on the control topic; True once the broker confirmed it."""
    return all(bus.publish(bus.control_topic, [(command.crawl_id.encode(), encode(command))]))
