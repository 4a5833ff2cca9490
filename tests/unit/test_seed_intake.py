"""Seed intake (crawl_platform.pipeline.batch.SeedIntake): good crawl requests registered, bad ones (extraction
rules that do not parse included) sent to the dead-letter topic with the reason."""

from __future__ import annotations

import json

import pytest

from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import encode
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.pipeline.intake import SeedIntake
from tests.unit.crawl_rows import crawl_request


def _seed_payload(crawl_id: str, **overrides) -> bytes:
    body = json.loads(encode(crawl_request(crawl_id, "http://a.example/")))
    return json.dumps(body | overrides).encode()


def _publish_seeds(bus: KafkaBus, payloads: list[bytes]) -> OffsetRange:
    assert all(bus.publish(bus.seeds_topic, [(b"same-key", p) for p in payloads]))
    (part,) = [p for p, (_, high) in bus.watermarks(bus.seeds_topic).items() if high]
    return OffsetRange(part, 0, len(payloads))


def _dead_letters(bus: KafkaBus) -> int:
    return sum(high for _, high in bus.watermarks(bus.dead_letter_topic).values())


def test_seed_intake_registers_good_requests_and_dead_letters_bad_ones(store, bus):
    offsets = _publish_seeds(bus, [
        _seed_payload("good-1"),
        b"{not json",
        _seed_payload("bad-seed", seeds=["ftp://files.example/"]),
        _seed_payload("good-2"),
    ])
    report = SeedIntake(bus, store).register(offsets)
    assert report.crawls == ["good-1", "good-2"]
    assert report.dead_letters == 2
    assert _dead_letters(bus) == 2
    assert {r[0] for r in store.query("SELECT crawl_id FROM crawls")} == {"good-1", "good-2"}


@pytest.mark.parametrize("override", [{"max_pages": 2**40}, {"max_depth": 2**40},
                                      {"submitted_at": float("nan")}, {"submitted_at": 1e300}])
def test_seed_intake_dead_letters_requests_the_store_cannot_hold(store, bus, override):
    offsets = _publish_seeds(bus, [_seed_payload("good-1"), _seed_payload("huge", **override),
                                   _seed_payload("good-2")])
    report = SeedIntake(bus, store).register(offsets)
    assert report.crawls == ["good-1", "good-2"]
    assert report.dead_letters == 1


def test_seed_intake_dead_letters_a_request_whose_extraction_rules_do_not_parse(store, bus):
    from crawl_platform.bus.messages import decode_dead_letter  # noqa: PLC0415

    rules = '{"fields": {"title": {"selector": "css:h1", "type": "integer"}}}'
    offsets = _publish_seeds(bus, [_seed_payload("bad-rules", extract_rules=rules),
                                   _seed_payload("good", extract_rules='{"fields": {"title": "css:h1"}}')])
    report = SeedIntake(bus, store).register(offsets)
    assert (report.crawls, report.dead_letters) == (["good"], 1)
    ((part, (_, high)),) = [(p, w) for p, w in bus.watermarks(bus.dead_letter_topic).items() if w[1]]
    (letter,) = [decode_dead_letter(r.value) for r in bus.read_range(bus.dead_letter_topic, OffsetRange(part, 0, high))]
    assert letter.reason == ("field 'extract_rules': extract_rules: fields.title.type: type must be one of "
                             "string, int, float, bool, date, list, not 'integer'")
    assert store.query("SELECT crawl_id, extract_rules IS NOT NULL FROM crawls") == [("good", True)]


def test_sitemaps_of_a_refused_host_leave_the_crawl_with_its_seeds_and_the_range_registered(store, bus):
    from tests.unit.conftest import loopback_fetcher  # noqa: PLC0415

    # The network guard allows 127.0.0.1 only: the robots.txt of 127.0.0.2 is never asked for.
    fetcher = loopback_fetcher(allowed_networks=["127.0.0.1/32"])
    offsets = _publish_seeds(bus, [
        json.dumps(json.loads(_seed_payload("refused", use_sitemaps=True)) | {
            "seeds": ["http://127.0.0.2:9/"]}).encode(),
        _seed_payload("after"),
    ])
    report = SeedIntake(bus, store, fetcher).register(offsets)
    assert (report.crawls, report.dead_letters) == (["refused", "after"], 0)
    assert store.query("SELECT url FROM frontier WHERE crawl_id = 'refused'") == [("http://127.0.0.2:9/",)]
