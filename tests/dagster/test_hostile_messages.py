"""Messages from an outside producer (kafka-python, a second Kafka client) on the seeds, control and
frontier topics: each kind of bad message goes to the dead-letter topic with its reason and position,
the good ones around it are applied, and the sensors' cursors move past it all."""

from __future__ import annotations

import base64
import json
import time

import pytest
from dagster import SensorResult, build_sensor_context

from crawl_platform.bus.messages import CrawlControl, FrontierURL, decode_crawl_request, decode_dead_letter, encode
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.batch import BatchCrawler
from crawl_platform.pipeline.control import ControlIntake
from crawl_platform_dagster.resources.crawl import CrawlSettingsResource
from crawl_platform_dagster.sensors.kafka import seeds_sensor
from tests.conftest import all_records
from tests.unit.crawl_rows import crawl_request, frontier_rows

YEAR_2999 = 32_503_600_000.0


def _tick(sensor, instance, cursor=None) -> SensorResult:
    context = build_sensor_context(instance=instance, cursor=cursor, resources={"crawl": CrawlSettingsResource()})
    result = sensor(context)
    assert isinstance(result, SensorResult)
    return result


def _request(crawl_id: str, *seeds: str, **fields: object) -> bytes:
    body = {"crawl_id": crawl_id, "seeds": list(seeds or ["http://127.0.0.1:9/"]), "max_pages": 10, "max_depth": 1,
            "scope": "host", "submitted_at": time.time(), "type": "crawl_request", "v": 1} | fields
    return json.dumps(body).encode()


def _send(producer, topic: str, payloads: list[bytes], key: bytes = b"one-partition") -> None:
    for payload in payloads:
        producer.send(topic, key=key, value=payload)
    producer.flush(10)


def _letters(bus, topic: str) -> dict[bytes, tuple[str, int]]:
    """Each dead letter's original payload -> (its reason, its offset)."""
    letters = [decode_dead_letter(rec.value) for rec in all_records(bus, bus.dead_letter_topic)]
    assert {letter.source_topic for letter in letters} <= {topic}
    return {base64.b64decode(letter.payload_b64): (letter.reason, letter.offset) for letter in letters}


def test_bad_crawl_requests_are_dead_letters_and_every_good_one_is_registered(
        crawl_env, bus, store, instance, batching_producer):
    Frontier(store, bus).register(decode_crawl_request(_request("victim", "http://127.0.0.1:9/v")))
    bad = {
        _request("cron-x", cron="x"): "field 'cron': cron schedule 'x' is not a valid 5-field cron expression",
        _request("deep", extract_rules="fields:\n  a: " + "[" * 5000 + "]" * 5000): "field 'extract_rules': ",
        _request("a...b"): "field 'crawl_id': crawl id 'a...b' must be 1-128 letters",
        _request("newline\n"): "field 'crawl_id': crawl id 'newline\\n' must be 1-128 letters",
        _request("victim@x", "http://evil.example/"):
            "crawl victim@x: a pass of the recurring crawl victim keeps its options, and these differ",
        _request("victim", "http://127.0.0.1:9/v", "http://127.0.0.1:9/other"):
            "crawl victim is registered already with other seeds: submit it under a new id",
        _request("future", submitted_at=YEAR_2999): "field 'submitted_at': 32503600000.0 is ",
        _request("backtrack", allow_patterns=["(a+)+(?=b)"]):
            "field 'allow_patterns': pattern '(a+)+(?=b)' is not a valid RE2 regular expression",
        _request("ftp", "ftp://files.example/"): "'ftp://files.example/'",
        _request("agent", user_agent="Bot\r\nX-Injected: 1"): "field 'user_agent': user agent must be one line",
        b'{"crawl_id": "c", "seeds": [' + b'"http://127.0.0.1:9/",' * 3 + b'], "type": "crawl_request", "v": 1}':
            "not JSON",
    }
    good = [_request(f"good-{i}", f"http://127.0.0.1:9/{i}") for i in range(3)]
    _send(batching_producer, crawl_env.seeds_topic, [good[0], *bad, good[1], good[2]])
    result = _tick(seeds_sensor, instance)
    assert not result.run_requests
    assert {row[0] for row in store.query("SELECT crawl_id FROM crawls")} == {"victim", "good-0", "good-1", "good-2"}
    assert frontier_rows(store, "victim") == {"http://127.0.0.1:9/v": (0, "queued")}  # nothing added to it
    letters = _letters(bus, crawl_env.seeds_topic)
    assert set(letters) == set(bad)
    for payload, start in bad.items():
        reason, _offset = letters[payload]
        assert start in reason, reason
        assert "\n" not in reason
    assert sorted(offset for _reason, offset in letters.values()) == list(range(1, len(bad) + 1))
    quiet = _tick(seeds_sensor, instance, result.cursor)  # the cursor moved past them all
    assert not quiet.run_requests
    assert quiet.skip_reason.skip_message == "no new crawl requests"


def test_bad_control_commands_are_dead_letters_and_a_later_good_one_still_applies(
        crawl_env, bus, store, batching_producer):
    frontier = Frontier(store, bus)
    frontier.register(crawl_request("ctl", "http://127.0.0.1:9/"))
    command = {"crawl_id": "ctl", "action": "pause", "issued_at": time.time(), "type": "crawl_control", "v": 1}
    bad = {
        json.dumps(command | {"issued_at": YEAR_2999}).encode(): "field 'issued_at': 32503600000.0 is ",
        json.dumps(command | {"action": "explode"}).encode(): "field 'action' must be one of",
        json.dumps(command | {"crawl_id": "ghost"}).encode(): "no crawl 'ghost'",
        json.dumps(command | {"crawl_id": "ctl\n"}).encode(): "field 'crawl_id': crawl id 'ctl\\n' must be",
        b"\x00\xff": "not JSON",
    }
    later = encode(CrawlControl("ctl", "pause", time.time() + 1))
    _send(batching_producer, crawl_env.control_topic, [*bad, later], key=b"ctl")
    (part,) = [p for p, (_low, high) in bus.log_ends(crawl_env.control_topic).items() if high]
    report = ControlIntake(bus, store).apply(OffsetRange(part, 0, len(bad) + 1))
    assert [(o.crawl_id, o.after.value) for o in report.outcomes] == [("ctl", "paused")]
    assert report.dead_letters == len(bad)
    letters = _letters(bus, crawl_env.control_topic)
    assert set(letters) == set(bad)
    for payload, start in bad.items():
        assert start in letters[payload][0], letters[payload][0]
    assert frontier.status("ctl")[0].state == "paused"


def test_frontier_messages_outside_their_crawl_are_dead_letters_and_never_fetched(
        crawl_env, bus, store, site, batching_producer):
    frontier = Frontier(store, bus)
    frontier.register(crawl_request("fr", site.base_url + "/", max_depth=2))
    admitted = encode(FrontierURL("fr", site.base_url + "/", 0))
    bad = {
        encode(FrontierURL("fr", "http://127.0.0.2:9/elsewhere", 0)):
            "http://127.0.0.2:9/elsewhere is not in the frontier of crawl fr (outside its scope or caps)",
        encode(FrontierURL("fr", site.base_url + "/not-admitted", 1)): "is not in the frontier of crawl fr",
        json.dumps({"crawl_id": "fr", "url": site.base_url + "/", "depth": 2**31, "type": "frontier_url",
                    "v": 1}).encode(): "field 'depth' must be 0..10000, got 2147483648",
        encode(FrontierURL("nobody", site.base_url + "/", 0)): "unknown crawl 'nobody'",
        b'{"type":"frontier_url","v":1,"crawl_id":"fr","url":"javascript:alert(1)","depth":0}': "javascript",
    }
    _send(batching_producer, crawl_env.frontier_topic, [*bad, admitted], key=b"127.0.0.1")
    ranges = [OffsetRange(p, low, high) for p, (low, high) in bus.log_ends(crawl_env.frontier_topic).items()
              if high > low]
    crawler = BatchCrawler.from_settings(crawl_env)
    try:
        report = crawler.fetch_and_land("outside", ranges)
    finally:
        crawler.close()
    assert report.fetched == 1
    assert {s.path for s in site.requests} <= {"/", "/robots.txt"}
    assert [r[0] for r in store.query("SELECT url FROM pages")] == [site.base_url + "/"]
    letters = _letters(bus, crawl_env.frontier_topic)
    assert set(letters) == set(bad)
    for payload, start in bad.items():
        assert start in letters[payload][0], letters[payload][0]


@pytest.mark.parametrize("crawl_id", ["a...b", "x\ny"])
def test_a_stored_crawl_id_dagster_cannot_take_does_not_stop_the_records_sensor(crawl_id, crawl_env, store, instance):
    from crawl_platform_dagster.resources.store import CrawlStoreResource  # noqa: PLC0415
    from crawl_platform_dagster.sensors.records import records_sensor  # noqa: PLC0415

    rules = '{"fields":{"title":{"selector":"css:title","type":"string"}}}'
    store.ensure_schema()
    with store.write() as con:  # as a lake from before ids were checked holds them
        for cid in (crawl_id, "fine"):
            con.execute("""INSERT INTO crawls (crawl_id, seeds, scope, max_pages, max_depth, submitted_at,
                                               registered_at, extract_rules)
                           VALUES (?, ['http://127.0.0.1:9/'], 'host', 1, 0, now(), now(), ?)""", [cid, rules])
            con.execute("""INSERT INTO pages (url, crawl_id, version, status, fetched_at, content_hash, batch_id,
                                              content_length, elapsed_ms, content_type, warc_file)
                           VALUES (?, ?, 1, 200, now(), 'h', 'b', 1, 1, 'text/html', 'w.warc.gz')""",
                        [f"http://127.0.0.1:9/{len(cid)}", cid])
    context = build_sensor_context(instance=instance, resources={"crawl_store": CrawlStoreResource()})
    result = records_sensor(context)
    assert [r.partition_key for r in result.run_requests] == ["fine"]
