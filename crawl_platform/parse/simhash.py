"""A 64-bit SimHash (Charikar) of a document's main text, and the Hamming distance between two.

The parser (:mod:`crawl_platform.parse.main_text`) fingerprints every document's main text with
:func:`simhash64` on the crawl path, and :mod:`crawl_platform.dedup.near_duplicates` groups the
fingerprints that lie within a few bits of each other. The features are overlapping 3-word
shingles of the lower-cased text (Broder's w-shingling, so word order counts, unlike a bag of
words), each weighted by how often it occurs; a bit of the hash is set where most features'
hashes have it set. Why not a library: PyPI's ``simhash`` (2.1.2, last released 2022) overflows
on numpy 2 (``OverflowError: Python integer 291 out of bounds for uint8``) and hashes 4-character
windows with md5 one by one; trafilatura's ``Simhash`` hashes single words in a Python loop of 64
steps each, several times slower than this one; the C/Rust packages on PyPI are one-person
releases without upkeep. This one hashes each word once with ``zlib.crc32`` (stable across
processes and machines, unlike ``hash()``), spreads it to 64 bits and combines shingles with the
splitmix64 finaliser in numpy, and counts bits with ``unpackbits``, with no Python loop per word
(its cost is part of what ``benchmarks/main_text_cost.py`` measures), and the values are pinned by
tests so that hashes in the lake stay comparable across releases.
"""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt

SHINGLE_WORDS = 3
BITS = 64
_U64 = np.uint64


def _mix(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser: every input bit flips about half the output bits (wrapping arithmetic)."""
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def shingle_hashes(text: str) -> npt.NDArray[np.uint64]:
    """The 64-bit hash of each overlapping 3-word shingle of ``text`` (of each word when fewer)."""
    words = text.lower().split()
    if not words:
        return np.empty(0, _U64)
    h = _mix(np.fromiter(map(zlib.crc32, map(str.encode, words)), _U64, len(words)))  # no Python frame per word
    if len(words) < SHINGLE_WORDS:
        return h
    # Position-dependent multipliers make "a b c" and "c b a" different shingles.
    return _mix(h[:-2] ^ (h[1:-1] * _U64(0x9E3779B97F4A7C15)) ^ (h[2:] * _U64(0xC2B2AE3D27D4EB4F)))


def simhash64(text: str) -> int | None:
    """The text's 64-bit SimHash as an unsigned int (the ``documents.simhash`` UBIGINT), or None
    for text without a single word (nothing to fingerprint: such documents join no near group)."""
    features = shingle_hashes(text)
    if not len(features):
        return None
    bits = np.unpackbits(features.astype("<u8").view(np.uint8), bitorder="little").reshape(-1, BITS)
    majority = bits.sum(axis=0, dtype=np.int64) * 2 > len(features)
    return int.from_bytes(np.packbits(majority, bitorder="little").tobytes(), "little")


def hamming(a: int, b: int) -> int:
    """Bits in which two SimHashes differ."""
    return (a ^ b).bit_count()
