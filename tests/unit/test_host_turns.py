"""HostTurns (crawl_platform.fetch.turns): workers get the queue whose host is ready first, a queue
is out with one worker at a time, and every item is handed out exactly once."""

from __future__ import annotations

import threading
import time
from collections import Counter

from crawl_platform.fetch.turns import HostTurns


class Clock:
    """A host is ready ``gap`` after its latest item was taken (what a pacer would say)."""

    def __init__(self, gap: float, ready: dict[str, float] | None = None) -> None:
        self.gap = gap
        self.ready = dict(ready or {})

    def ready_at(self, origin: str) -> float:
        return self.ready.get(origin, 0.0)

    def taken(self, origin: str) -> None:
        self.ready[origin] = time.monotonic() + self.gap


def test_the_host_whose_turn_comes_first_is_served_first():
    now = time.monotonic()
    clock = Clock(0.0, {"http://late": now + 0.3, "http://early": now - 1.0, "http://soon": now + 0.1})
    turns = HostTurns(clock, [("http://late", ["l1"]), ("http://early", ["e1"]), ("http://soon", ["s1"])])
    taken = [turns.take() for _ in range(3)]
    assert [item for _, item in taken] == ["e1", "s1", "l1"]
    assert time.monotonic() - now >= 0.29  # it waited for the late host's turn instead of skipping it
    assert turns.take() is None


def test_a_queue_is_out_with_one_worker_at_a_time_and_comes_back_while_it_has_items():
    clock = Clock(0.2)
    turns = HostTurns(clock, [("http://a", ["a1", "a2"])])
    assert turns.take() == (0, "a1")
    clock.taken("http://a")
    assert turns.take() is None  # the rest of a's queue is with the first worker
    started = time.monotonic()
    assert turns.take(previous=0) == (0, "a2")  # given back, and handed out at its turn
    assert time.monotonic() - started >= 0.19
    assert turns.take(previous=0) is None


def test_a_worker_keeps_a_host_that_needs_no_gap_and_hands_on_one_that_does():
    clock = Clock(0.0)
    turns = HostTurns(clock, [("http://a", ["a1", "a2"]), ("http://b", ["b1"])])
    assert turns.take() == (0, "a1")
    assert turns.take(previous=0) == (0, "a2")  # a is ready at once: same worker, same connection
    turns = HostTurns(clock, [("http://a", ["a1", "a2"]), ("http://b", ["b1"])])
    assert turns.take() == (0, "a1")
    clock.ready["http://a"] = time.monotonic() + 10
    assert turns.take(previous=0) == (1, "b1")  # a must wait: the worker serves b meanwhile


def test_many_workers_get_every_item_once_and_never_two_of_one_host_at_once():
    clock = Clock(0.005)
    queues = [(f"http://h{h}", [f"h{h}-{k}" for k in range(10)]) for h in range(12)]
    turns = HostTurns(clock, queues)
    got: list[str] = []
    busy: Counter[str] = Counter()
    overlaps: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        index = None
        while (turn := turns.take(index)) is not None:
            index, item = turn
            origin = queues[index][0]
            with lock:
                busy[origin] += 1
                if busy[origin] > 1:
                    overlaps.append(origin)
                got.append(item)
            time.sleep(0.001)
            with lock:
                busy[origin] -= 1
            clock.taken(origin)

    workers = [threading.Thread(target=work) for _ in range(5)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert sorted(got) == sorted(item for _, items in queues for item in items)
    assert overlaps == []


def test_an_item_put_back_goes_first_and_waits_for_its_hosts_turn():
    clock = Clock(0.3)
    turns = HostTurns(clock, [("http://a", ["a1", "a2"]), ("http://b", ["b1"])])
    assert turns.take() == (0, "a1")
    clock.taken("http://a")  # the worker used a's turn on something else (its robots.txt)
    turns.put_back(0, "a1")
    assert turns.take(previous=0) == (1, "b1")  # a must wait out its gap: b is served meanwhile
    started = time.monotonic()
    assert turns.take(previous=1) == (0, "a1")  # a1 again, first in its queue, at a's turn
    assert time.monotonic() - started >= 0.25
