"""The 64-bit SimHash of main text (crawl_platform.parse.simhash) and the grouping of copies
(crawl_platform.dedup.near_duplicates.group_duplicates): stable values, near texts close and
different texts far, and groups of generated documents with known printer versions, tracking
variants and exact copies, checked against an all-pairs search."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from crawl_platform.dedup.near_duplicates import DocumentPrint, GroupMember, blocks, group_duplicates
from crawl_platform.parse.simhash import hamming, simhash64

WORDS = [f"{stem}{k}" for stem in ("river", "stone", "cloud", "paper", "light", "north", "amber", "quiet")
         for k in range(40)]


def text(seed: int, n_words: int = 600) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def doc(url: str, body: str, main_text: str | None) -> DocumentPrint:
    return DocumentPrint(url, 1, hashlib.sha256(body.encode()).hexdigest(),
                         simhash64(main_text) if main_text is not None else None)


def test_values_are_stable_across_processes_and_releases():
    # Pinned: the lake keeps these values, and new ones must stay comparable with them.
    assert simhash64("The quick brown fox jumps over the lazy dog") == 487999360881581393
    assert simhash64("hello") == 2426861847642320677
    assert simhash64("hello world") == 72551678530299904
    assert simhash64(text(1)) == simhash64(text(1))


def test_case_and_whitespace_do_not_count_and_no_words_is_no_hash():
    assert simhash64("Hello   World\n\nagain\t") == simhash64("hello world again")
    assert simhash64("") is None
    assert simhash64(" \n\t ") is None


def test_texts_one_word_apart_are_within_three_bits():
    base = text(1).split()
    for position in (0, 100, 200, 300, 400, 500, 599):
        edited = list(base)
        edited[position] = "changed"
        assert hamming(simhash64(" ".join(base)), simhash64(" ".join(edited))) <= 3, position


def test_different_texts_are_far_apart():
    prints = [simhash64(text(seed)) for seed in range(20)]
    distances = [hamming(a, b) for a, b in itertools.combinations(prints, 2)]
    assert min(distances) > 12  # 64 random bits differ in 32 on average
    assert 24 <= sum(distances) / len(distances) <= 40
    words = text(1).split()
    assert hamming(simhash64(" ".join(words)), simhash64(" ".join(reversed(words)))) > 12  # order counts


@pytest.mark.parametrize("max_distance", [1, 3, 5, 8])
def test_blocks_cover_the_64_bits_so_close_hashes_share_one(max_distance):
    cut = blocks(max_distance)
    assert len(cut) == max_distance + 1
    assert sum(mask.bit_length() for _, mask in cut) == 64
    assert [shift for shift, _ in cut] == sorted(shift for shift, _ in cut)
    rng = random.Random(max_distance)
    for _ in range(500):
        a = rng.getrandbits(64)
        b = a
        for bit in rng.sample(range(64), max_distance):
            b ^= 1 << bit
        assert any((a >> s) & m == (b >> s) & m for s, m in cut)


def test_printer_versions_tracking_variants_and_exact_copies_form_the_planted_groups():
    article, other, third = text(1), text(2), text(3)
    corrected = article.replace(article.split()[250], "corrected", 1)
    chrome = "<nav>home news sport</nav>"
    docs = [
        doc("http://h/news/1", chrome + article, article),
        doc("http://h/news/1/print", article + "<p>printed</p>", article),  # a bare layout, the same article
        doc("http://h/news/1-corrected", chrome + corrected, corrected),  # one word of the article changed
        doc("http://h/news/2", chrome + other, other),
        doc("http://h/news/2?ref=feed", chrome + other + "session 9d20be", other),  # main text unchanged
        doc("http://h/news/2?ref=newsletter", chrome + other + "session a81f3c", other),
        doc("http://h/news/3", chrome + third, third),
        doc("http://h/mirror/news/3", chrome + third, third),  # the very same bytes
        *(doc(f"http://h/news/{k}", chrome + text(k), text(k)) for k in range(4, 30)),
    ]
    groups = group_duplicates(docs)
    assert [g.representative for g in groups] == ["http://h/news/1", "http://h/news/2", "http://h/news/3"]
    printer, tracking, mirror = (g.members for g in groups)
    corrected_distance = hamming(docs[0].simhash or 0, docs[2].simhash or 0)
    assert 0 < corrected_distance <= 3
    assert printer == (GroupMember("http://h/news/1", 1, "exact", 0),
                       GroupMember("http://h/news/1-corrected", 1, "near", corrected_distance),
                       GroupMember("http://h/news/1/print", 1, "near", 0))
    assert tracking == (GroupMember("http://h/news/2", 1, "exact", 0),
                        GroupMember("http://h/news/2?ref=feed", 1, "near", 0),
                        GroupMember("http://h/news/2?ref=newsletter", 1, "near", 0))
    assert mirror == (GroupMember("http://h/news/3", 1, "exact", 0),
                      GroupMember("http://h/mirror/news/3", 1, "exact", 0))


def test_a_chain_of_near_copies_is_one_group_and_zero_bits_only_joins_equal_hashes():
    base = 0x0123456789ABCDEF
    a, b, c = base, base ^ 0b111, base ^ 0b111111  # a-b 3 bits, b-c 3 bits, a-c 6 bits
    docs = [DocumentPrint("http://h/a", 1, "ha", a), DocumentPrint("http://h/bb", 1, "hb", b),
            DocumentPrint("http://h/cc", 2, "hc", c), DocumentPrint("http://h/dd", 1, "hd", a)]
    (group,) = group_duplicates(docs)
    assert group.members == (GroupMember("http://h/a", 1, "exact", 0), GroupMember("http://h/bb", 1, "near", 3),
                             GroupMember("http://h/cc", 2, "near", 6), GroupMember("http://h/dd", 1, "near", 0))
    (equal,) = group_duplicates(docs, max_distance=0)
    assert [m.url for m in equal.members] == ["http://h/a", "http://h/dd"]
    assert group_duplicates(docs, max_distance=2) == [equal]


def test_documents_without_main_text_group_only_by_content_hash():
    docs = [DocumentPrint("http://h/empty-1", 1, "same", None), DocumentPrint("http://h/empty-22", 3, "same", None),
            DocumentPrint("http://h/empty-3", 1, "other", None)]
    (group,) = group_duplicates(docs)
    assert group.members == (GroupMember("http://h/empty-1", 1, "exact", None),
                             GroupMember("http://h/empty-22", 3, "exact", None))


def test_the_blocks_find_exactly_what_comparing_all_pairs_finds():
    rng = random.Random(11)
    prints = [rng.getrandbits(64) for _ in range(300)]
    prints += [p ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for p in prints[:60]]  # 1-2 bits off
    prints += [p ^ sum(1 << b for b in rng.sample(range(64), 3)) for p in prints[60:90]]  # 3 bits off
    prints += [p ^ sum(1 << b for b in rng.sample(range(64), 4)) for p in prints[90:120]]  # 4 bits: apart
    docs = [DocumentPrint(f"http://h/{i}", 1, f"h{i}", p) for i, p in enumerate(prints)]
    parent = list(range(len(docs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(len(docs)), 2):
        if hamming(prints[i], prints[j]) <= 3:
            parent[find(j)] = find(i)
    expected: dict[int, set[str]] = {}
    for i, d in enumerate(docs):
        expected.setdefault(find(i), set()).add(d.url)
    found = sorted(sorted(m.url for m in g.members) for g in group_duplicates(docs))
    assert found == sorted(sorted(s) for s in expected.values() if len(s) > 1)
    assert len(found) >= 90


@pytest.mark.parametrize("bad", [-1, 9, 64])
def test_a_distance_outside_the_blocks_range_is_refused(bad):
    with pytest.raises(ValueError, match=f"max_distance must be between 0 and 8 bits, not {bad}"):
        group_duplicates([], bad)
