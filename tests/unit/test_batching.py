"""Cutting a topic's backlog into batches (crawl_platform.bus.offsets) and the keys that name them."""

from __future__ import annotations

import pytest

from crawl_platform.bus.offsets import (
    OffsetRange,
    batch_key,
    cursor_number,
    cursor_topic_id,
    decode_cursor,
    encode_cursor,
    parse_batch_key,
    partitions_of,
    plan_batches,
    with_cursor_number,
)
from crawl_platform.config import Settings


def test_batches_are_cut_at_batch_size():
    plan = plan_batches({0: (0, 120)}, {}, batch_size=50, max_batches=10)
    assert plan.ranges == [OffsetRange(0, 0, 50), OffsetRange(0, 50, 100), OffsetRange(0, 100, 120)]
    assert plan.cursor == {0: 120}
    assert plan.backlog == 0
    assert plan.lost_partitions == []


def test_batches_round_robin_over_partitions_oldest_first():
    watermarks = {0: (0, 100), 1: (0, 100), 2: (0, 30), 3: (0, 0)}
    plan = plan_batches(watermarks, {}, batch_size=50, max_batches=10)
    assert plan.ranges == [
        OffsetRange(0, 0, 50), OffsetRange(1, 0, 50), OffsetRange(2, 0, 30),
        OffsetRange(0, 50, 100), OffsetRange(1, 50, 100),
    ]
    assert plan.cursor == {0: 100, 1: 100, 2: 30, 3: 0}


def test_max_batches_caps_the_plan_and_the_rest_is_backlog():
    watermarks = {0: (0, 100), 1: (0, 100), 2: (0, 100)}
    plan = plan_batches(watermarks, {}, batch_size=25, max_batches=4)
    assert plan.ranges == [OffsetRange(0, 0, 25), OffsetRange(1, 0, 25), OffsetRange(2, 0, 25),
                           OffsetRange(0, 25, 50)]
    assert plan.cursor == {0: 50, 1: 25, 2: 25}
    assert plan.backlog == 300 - 100


def test_groups_put_the_ranges_of_several_partitions_in_one_batch():
    watermarks = {0: (0, 100), 1: (0, 30), 2: (0, 60), 3: (0, 0)}
    plan = plan_batches(watermarks, {}, batch_size=50, max_batches=10, groups=2)
    # group 0 = partitions 0 and 2, group 1 = partitions 1 and 3
    assert plan.batches == [
        [OffsetRange(0, 0, 50), OffsetRange(2, 0, 50)],
        [OffsetRange(1, 0, 30)],
        [OffsetRange(0, 50, 100), OffsetRange(2, 50, 60)],
    ]
    assert plan.cursor == {0: 100, 1: 30, 2: 60, 3: 0}
    assert plan.backlog == 0


def test_no_two_batches_of_one_tick_share_a_partition_unless_a_group_has_more_backlog():
    watermarks = dict.fromkeys(range(8), (0, 40))
    plan = plan_batches(watermarks, {}, batch_size=50, max_batches=10, groups=4)
    assert len(plan.batches) == 4
    seen = [p for batch in plan.batches for p in partitions_of(batch)]
    assert sorted(seen) == list(range(8))
    assert all({p % 4 for p in partitions_of(b)} == {i} for i, b in enumerate(plan.batches))


def test_one_group_takes_every_partition():
    plan = plan_batches({0: (0, 5), 1: (0, 7)}, {}, batch_size=50, max_batches=10, groups=1)
    assert plan.batches == [[OffsetRange(0, 0, 5), OffsetRange(1, 0, 7)]]


def test_zero_max_batches_plans_nothing():
    plan = plan_batches({0: (0, 10)}, {}, batch_size=5, max_batches=0)
    assert plan.ranges == []
    assert plan.backlog == 10


def test_cursor_advances_and_the_next_tick_continues_where_it_stopped():
    watermarks = {0: (0, 70), 1: (0, 20)}
    first = plan_batches(watermarks, {}, batch_size=30, max_batches=2)
    second = plan_batches(watermarks, first.cursor, batch_size=30, max_batches=10)
    covered = sorted(first.ranges + second.ranges)
    assert covered == [OffsetRange(0, 0, 30), OffsetRange(0, 30, 60), OffsetRange(0, 60, 70),
                       OffsetRange(1, 0, 20)]
    assert second.backlog == 0
    # Nothing new arrived: a third tick plans nothing and keeps the cursor.
    third = plan_batches(watermarks, second.cursor, batch_size=30, max_batches=10)
    assert third.ranges == []
    assert third.cursor == second.cursor


def test_new_messages_after_the_cursor_are_planned_from_the_cursor():
    plan = plan_batches({0: (0, 15)}, {0: 10}, batch_size=50, max_batches=5)
    assert plan.ranges == [OffsetRange(0, 10, 15)]


def test_low_watermark_above_the_cursor_skips_what_the_log_no_longer_holds():
    plan = plan_batches({0: (40, 60)}, {0: 10}, batch_size=50, max_batches=5)
    assert plan.ranges == [OffsetRange(0, 40, 60)]
    assert plan.lost_partitions == []  # retention, not a lost log


def test_high_watermark_below_the_cursor_means_the_partition_was_lost():
    watermarks = {0: (0, 5), 1: (0, 100)}
    plan = plan_batches(watermarks, {0: 80, 1: 90}, batch_size=50, max_batches=5)
    assert plan.lost_partitions == [0]
    assert plan.ranges == [OffsetRange(0, 0, 5), OffsetRange(1, 90, 100)]
    assert plan.cursor == {0: 5, 1: 100}


def test_partitions_missing_from_the_cursor_start_at_their_low_watermark():
    plan = plan_batches({0: (0, 3), 1: (7, 9)}, {0: 3}, batch_size=10, max_batches=5)
    assert plan.ranges == [OffsetRange(1, 7, 9)]
    assert plan.lost_partitions == []


@pytest.mark.parametrize("cursor", [{}, {0: 5}, {0: 12, 3: 0, 7: 123456789}])
@pytest.mark.parametrize("epoch", [0, 3])
def test_cursor_round_trip(cursor, epoch):
    assert decode_cursor(encode_cursor(cursor, epoch)) == (cursor, epoch)


def test_a_number_kept_in_a_cursor_leaves_its_offsets_alone():
    raw = encode_cursor({0: 5, 3: 9}, 2, "topic-id")
    kept = with_cursor_number(raw, "swept_at", 1_700_000_000.5)
    assert decode_cursor(kept) == ({0: 5, 3: 9}, 2)
    assert cursor_topic_id(kept) == "topic-id"
    assert cursor_number(kept, "swept_at") == 1_700_000_000.5
    assert cursor_number(raw, "swept_at") is None
    for unreadable in (None, "", "not json", "[]", '{"swept_at": "x"}', '{"swept_at": true}'):
        assert cursor_number(unreadable, "swept_at") is None


@pytest.mark.parametrize(
    "raw",
    [None, "", "not json", "null", "[]", '"text"', "{}", '{"offsets": [1, 2]}',
     '{"offsets": {"zero": 1}}', '{"offsets": {"0": "x"}}', '{"offsets": {}, "epoch": "x"}',
     '{"offsets": {"0": NaN}}'],
)
def test_unreadable_cursor_starts_from_scratch(raw):
    assert decode_cursor(raw) == ({}, 0)


@pytest.mark.parametrize("raw", ['{"offsets": {"0": 1e400}}', '{"offsets": {}, "epoch": 1e400}'])
def test_cursor_with_infinite_numbers_starts_from_scratch(raw):
    assert decode_cursor(raw) == ({}, 0)


@pytest.mark.parametrize("epoch", [0, 1, 42])
@pytest.mark.parametrize("offsets", [OffsetRange(0, 0, 1), OffsetRange(7, 100, 350)])
def test_batch_key_round_trip(epoch, offsets):
    key = batch_key(epoch, offsets)
    assert parse_batch_key(key) == (epoch, [offsets])


def test_multi_range_batch_key_round_trip_in_partition_order():
    batch = [OffsetRange(5, 40, 90), OffsetRange(1, 0, 200)]
    key = batch_key(2, batch)
    assert key == "e2.p1-0-200+p5-40-90"
    assert parse_batch_key(key) == (2, [OffsetRange(1, 0, 200), OffsetRange(5, 40, 90)])
    assert partitions_of(parse_batch_key(key)[1]) == [1, 5]


def test_a_batch_key_naming_a_partition_twice_is_rejected():
    with pytest.raises(ValueError, match="a partition twice"):
        parse_batch_key("e0.p1-0-5+p1-5-9")


def test_an_empty_batch_has_no_key():
    with pytest.raises(ValueError, match="at least one"):
        batch_key(0, [])


def test_batch_keys_differ_by_epoch():
    offsets = OffsetRange(0, 0, 50)
    assert batch_key(0, offsets) != batch_key(1, offsets)


@pytest.mark.parametrize(
    "key",
    ["", "e0", "e0.", "0.p0-0-1", "ex.p0-0-1", "e-1.p0-0-1", "e.p0-0-1", "e0.0-0-1", "e0.p0-0",
     "e0.p0-0-1-2", "e0.px-0-1", "e0.p0-5-5", "e0.p0-6-5", "e0.p-1-0-1", "e0.p0-a-1", "e0.p0-0-1+",
     "e0.p0-0-1+x"],
)
def test_garbage_batch_key_is_rejected(key):
    with pytest.raises(ValueError, match="not a"):
        parse_batch_key(key)


def test_offset_range_parse_round_trip():
    offsets = OffsetRange(3, 10, 20)
    assert offsets.key == "p3-10-20"
    assert OffsetRange.parse(offsets.key) == offsets


@pytest.mark.parametrize("key", ["", "p3", "3-10-20", "p3-10", "p3-20-10", "p3-10-10", "q3-10-20", "p3-x-20"])
def test_offset_range_parse_rejects_garbage(key):
    with pytest.raises(ValueError, match="not an offset range key"):
        OffsetRange.parse(key)


@pytest.mark.parametrize(("partition", "start", "end"), [(-1, 0, 1), (0, -1, 1), (0, 5, 5), (0, 6, 5)])
def test_offset_range_refuses_empty_or_negative_ranges(partition, start, end):
    with pytest.raises(ValueError, match="invalid offset range"):
        OffsetRange(partition, start, end)


@pytest.mark.parametrize(
    ("batch_size", "host_delay_ms", "expected"),
    [(0, 250, 480), (0, 0, 5000), (0, 5, 5000), (0, 1000, 120), (0, 10_000, 100), (70, 250, 70), (9000, 0, 9000)],
)
def test_auto_batch_size_is_what_one_host_serves_in_the_target_time(batch_size, host_delay_ms, expected):
    settings = Settings(batch_size=batch_size, host_delay_ms=host_delay_ms, batch_seconds=120)
    assert settings.partition_batch_size() == expected


@pytest.mark.parametrize(
    ("batch_size", "host_delay_ms", "hosts_per_partition", "expected"),
    [(0, 250, 0.0, 480), (0, 250, 0.5, 480), (0, 1000, 3.0, 360), (0, 250, 2.5, 1200), (0, 250, 60.0, 5000),
     (70, 250, 60.0, 70)],
)
def test_auto_batch_size_grows_with_the_hosts_a_partition_holds(batch_size, host_delay_ms, hosts_per_partition,
                                                                 expected):
    """Hosts of one partition are fetched side by side: each gets the target time's share."""
    settings = Settings(batch_size=batch_size, host_delay_ms=host_delay_ms, batch_seconds=120)
    assert settings.partition_batch_size(hosts_per_partition) == expected


@pytest.mark.parametrize(("executor", "shards", "expected"), [("in_process", 0, 1), ("celery", 0, 4), ("celery", 2, 2),
                                                             ("in_process", 3, 3)])
def test_fetch_shards_default_follows_the_executor(executor, shards, expected):
    assert Settings(executor=executor, fetch_shards=shards).shard_count() == expected
