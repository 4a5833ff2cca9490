"""The read step of a batch (crawl_platform.pipeline.reader.BatchReader) on the real broker: what
it dead-letters, and with what."""

from __future__ import annotations

import base64

from crawl_platform.bus.messages import FrontierURL, decode_dead_letter, encode
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.frontier.read_model import FrontierReadModel
from crawl_platform.pipeline.reader import BatchReader
from crawl_platform.pipeline.submission import build_crawl_request
from tests.conftest import all_records


def test_a_url_of_an_unknown_crawl_is_dead_lettered_with_its_original_bytes_and_position(bus, store):
    Frontier(store, bus).register(build_crawl_request(["http://127.0.0.1:9/"], crawl_id="known"))
    # Not canonical (upper-case host, default port): a letter built from the decoded URL would differ.
    ghost = encode(FrontierURL("ghost", "HTTP://127.0.0.1:80/Ghost?b=2&a=1", 1))
    assert bus.publish(bus.frontier_topic, [(b"ghost-key", ghost)]) == [True]
    (ghost_at,) = [r for r in all_records(bus, bus.frontier_topic) if r.value == ghost]
    ranges = [OffsetRange(p, low, high) for p, (low, high) in bus.watermarks(bus.frontier_topic).items() if high]
    prepared = BatchReader(bus, store, FrontierReadModel(store)).prepare("b1", ranges)
    assert [i.crawl_id for i in prepared.items] == ["known"]
    (letter,) = [decode_dead_letter(r.value) for r in all_records(bus, bus.dead_letter_topic)]
    assert letter.reason == "unknown crawl 'ghost'"
    assert (letter.source_topic, letter.partition, letter.offset) == (bus.frontier_topic, ghost_at.partition,
                                                                      ghost_at.offset)
    assert base64.b64decode(letter.payload_b64) == ghost
