"""Splitting a prepared batch into fetch shards of whole hosts (crawl_platform.pipeline.reader.PreparedBatch)."""

from __future__ import annotations

from crawl_platform.fetch.fetcher import FetchRequest
from crawl_platform.fetch.politeness import origin_of
from crawl_platform.pipeline.reader import BatchReport, PreparedBatch
from crawl_platform.store.hosts import HostRecord


def _batch(per_host: dict[str, int]) -> PreparedBatch:
    requests = [FetchRequest(f"http://{host}/p{i}") for host, n in per_host.items() for i in range(n)]
    hosts = [HostRecord(f"http://{host}", delay_ms=300) for host in per_host]
    return PreparedBatch("e0.p0-0-1", [], requests, hosts, BatchReport("e0.p0-0-1"))


def _hosts(shard: list[FetchRequest]) -> set[str]:
    return {origin_of(r.url) for r in shard}


def test_a_host_is_never_split_across_shards_and_every_request_is_in_one():
    batch = _batch({"a.test": 50, "b.test": 30, "c.test": 20, "d.test": 10, "e.test": 5})
    shards = batch.shards(3)
    assert len(shards) == 3
    assert sorted(r.url for s in shards for r in s) == sorted(r.url for r in batch.requests)
    seen: set[str] = set()
    for shard in shards:
        assert not (_hosts(shard) & seen)
        seen |= _hosts(shard)


def test_shards_are_balanced_largest_host_first():
    batch = _batch({"a.test": 50, "b.test": 30, "c.test": 20, "d.test": 10, "e.test": 5})
    assert sorted(len(s) for s in batch.shards(3)) == [30, 35, 50]
    assert batch.shards(3) == batch.shards(3)  # deterministic: a re-run gets the same shards


def test_no_more_shards_than_hosts_or_than_min_urls_allow():
    assert len(_batch({"a.test": 40}).shards(4)) == 1
    assert len(_batch({"a.test": 3, "b.test": 3, "c.test": 3}).shards(4, min_urls=25)) == 1
    assert len(_batch({f"h{i}.test": 20 for i in range(6)}).shards(4, min_urls=25)) == 4
    assert _batch({}).shards(4) == []


def test_each_shard_gets_what_earlier_runs_learned_about_its_hosts():
    batch = _batch({"a.test": 2, "b.test": 1})
    for shard in batch.shards(2):
        assert {h.origin for h in batch.hosts_of(shard)} == _hosts(shard)
