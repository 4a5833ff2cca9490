"""Page events (crawl_platform.pipeline.page_events): every landed page version reaches the pages
topic, read back by a plain Kafka consumer as any subscriber would; events the broker did not
confirm are published again, and a confirmed batch is never recorded twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from confluent_kafka import Consumer, TopicPartition

from crawl_platform.bus.broker import free_port
from crawl_platform.bus.kafka import KafkaBus
from crawl_platform.bus.messages import FrontierURL, PageEvent, decode_page_event
from crawl_platform.cli.demo_site import DemoSite
from crawl_platform.pipeline.page_events import PageEventPublisher
from crawl_platform.store.database import CrawlStore
from tests.unit.crawl_rows import crawl_loop, crawl_request, fetch_result, land, page_html


def subscribed_events(settings, partitions: int) -> list[tuple[bytes, PageEvent]]:
    """Every event on the pages topic, read by a consumer of its own (no group, from offset 0)."""
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": "outside-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(settings.pages_topic, p, 0) for p in range(partitions)])
        events, at_end = [], set()
        while len(at_end) < partitions:
            msg = consumer.poll(10.0)
            assert msg is not None, "the pages topic stopped answering"
            if msg.error():
                assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
                at_end.add(msg.partition())
                continue
            events.append((msg.key(), decode_page_event(msg.value())))
        return events
    finally:
        consumer.close()


def test_every_landed_version_is_one_event_keyed_by_url(settings, store):
    bus = KafkaBus.from_settings(settings)
    bus.ensure_topics()
    with DemoSite(n_pages=30, seed=5).serve() as server:
        loop = crawl_loop(settings, bus, store)
        loop.crawler.frontier.register(crawl_request("ev", server.base_url + "/", max_pages=1000, max_depth=50))
        loop.run_until_idle()
    events = subscribed_events(settings, settings.topic_partitions)
    rows = store.query("SELECT url, version, status, content_hash, batch_id, warc_file, warc_offset, warc_length "
                       "FROM pages WHERE crawl_id = 'ev'")
    assert sorted((e.url, e.version, e.status, e.content_hash, e.batch_id, e.warc_file, e.warc_offset,
                   e.warc_length) for _, e in events) == sorted(rows)
    # The pointer leads to the version's archived response (the 404 page has one too).
    assert all(e.warc_file and e.warc_length for _, e in events if e.status is not None)
    assert all(key == e.url.encode() and e.crawl_id == "ev" for key, e in events)
    recorded = store.query("SELECT sum(events), count(*) FROM page_event_batches")[0]
    assert recorded == (len(rows), len({row[4] for row in rows}))


def test_events_the_broker_did_not_confirm_are_published_again_and_recorded_once(settings, store: CrawlStore):
    urls = [f"http://events.test/{i}" for i in range(3)]
    land(store, "b1", [FrontierURL("c", u, 0) for u in urls], [fetch_result(u, page_html(u)) for u in urls])
    # The broker is down when the batch's events go out: nothing is confirmed.
    down = settings.model_copy(update={"kafka_bootstrap_servers": f"127.0.0.1:{free_port()}"})
    down_bus = KafkaBus(down.kafka_config(), down.seeds_topic, down.frontier_topic, down.dead_letter_topic,
                        down.topic_partitions, timeout_s=3.0, producer_config={"message.timeout.ms": "2000"},
                        pages_topic=down.pages_topic)
    refused = PageEventPublisher(store, down_bus).publish_batch("b1")
    assert (refused.events, refused.unconfirmed) == (0, 3)
    assert store.query("SELECT count(*) FROM page_event_batches") == [(0,)]

    bus = KafkaBus.from_settings(settings)  # the broker is back
    publisher = PageEventPublisher(store, bus)
    bus.ensure_topics()
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=5)
    swept = publisher.republish_unrecorded(now=later)
    assert (swept.batches, swept.events, swept.unconfirmed) == (1, 3, 0)
    assert publisher.republish_unrecorded(now=later).batches == 0  # recorded: not swept again
    assert publisher.publish_batch("b1").events == 3  # a retry publishes again (at least once)...
    assert store.query("SELECT batch_id, events FROM page_event_batches") == [("b1", 3)]  # ...recorded once
    events = [e for _, e in subscribed_events(settings, settings.topic_partitions)]
    assert sorted(e.url for e in events) == sorted(urls * 2)
    assert {(e.version, e.status) for e in events} == {(1, 200)}


def test_events_and_frontier_urls_go_out_in_record_batches_and_the_bus_still_sees_each_log_end(settings):
    """The embedded broker keeps about 1.1 KB per record batch, so nothing is sent one record per
    batch. Its high watermark then stops short of a batched log's end; the bus reads the true end
    (KAFKA_EXACT_LOG_ENDS), and a subscriber reading to EOF gets every event all the same."""
    bus = KafkaBus.from_settings(settings)
    bus.ensure_topics()
    broker_marks = KafkaBus.from_settings(settings.model_copy(update={"kafka_exact_log_ends": False}))
    payloads = [(b"http://batched.test/", f"event {i}".encode()) for i in range(2000)]  # one key: one partition
    assert all(bus.publish(bus.pages_topic, payloads))
    assert all(bus.publish(bus.frontier_topic, payloads))
    for topic in (bus.pages_topic, bus.frontier_topic):
        assert sum(high for _low, high in broker_marks.watermarks(topic).values()) < 2000  # batches of many
        assert sum(high for _low, high in bus.watermarks(topic).values()) == 2000
    (partition,) = [p for p, (_low, high) in bus.watermarks(bus.pages_topic).items() if high]
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap_servers, "group.id": "outside-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(bus.pages_topic, partition, 0)])
        values = []
        while (msg := consumer.poll(10.0)) is not None and not msg.error():
            values.append(msg.value())
        assert msg is not None
        assert msg.error().code() == -191  # _PARTITION_EOF, after the last record
    finally:
        consumer.close()
    assert values == [value for _key, value in payloads]
