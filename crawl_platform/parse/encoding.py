"""Turns the bytes of a fetched page into text: which charset, and decoding that never fails.

Order of evidence, as browsers do it: a byte-order mark, then the ``charset`` of the
Content-Type header, then a ``<meta charset>`` / ``<meta http-equiv="Content-Type">`` near the
top of the document, then strict UTF-8, then statistical detection (charset_normalizer, which
comes with requests). Labels are mapped the way the WHATWG Encoding standard maps them, so a
page that says ``gb2312`` but uses GB18030 characters, or ``iso-8859-1`` with Windows-1252
quotes, still decodes to the right text. Bytes that are invalid in the chosen charset become
U+FFFD: a page with broken bytes lands with readable text rather than not at all. The parser
(:mod:`crawl_platform.parse.html`) calls :func:`decode_html`; landing stores the charset it chose.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

import charset_normalizer

_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.I)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.I)
_PRESCAN_BYTES = 4096
_DETECT_BYTES = 64 * 1024
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# WHATWG: labels that mean a superset in practice, keyed by Python codec name.
_SUPERSETS = {
    "gb2312": "gb18030", "gbk": "gb18030", "iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254",
    "tis-620": "cp874", "iso8859-11": "cp874", "euc_kr": "cp949", "shift_jis": "cp932", "big5": "big5hkscs",
    "utf-16": "utf-16-le",  # a UTF-16 page without a BOM is little-endian in practice
}
_ALIASES = {"x-gbk": "gbk", "x-sjis": "shift_jis", "x-user-defined": "cp1252"}


@dataclass(frozen=True)
class DecodedPage:
    text: str
    charset: str  # the Python codec name used, e.g. "utf-8", "gb18030", "cp1252"


def charset_of(content_type: str | None) -> str | None:
    """The raw ``charset`` label of a Content-Type header value, if any."""
    match = _HEADER_CHARSET.search(content_type or "")
    return match.group(1) if match else None


def normalize_charset(label: str | None) -> str | None:
    """A usable Python codec name for a charset label, or None when the label means nothing to us."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    name = _SUPERSETS.get(name, name)
    # A page cannot really be in these: a label naming them is a mistake, detection does better.
    return None if name in ("utf-7", "rot-13", "base64", "hex", "zlib", "bz2", "quopri", "uu") else name


def sniff_charset(body: bytes, content_type: str | None) -> str:
    """The charset to decode ``body`` with (see the module docstring for the order)."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    declared = normalize_charset(charset_of(content_type))
    if declared:
        return declared
    meta = _META_CHARSET.search(body[:_PRESCAN_BYTES])
    if meta:
        from_meta = normalize_charset(meta.group(1).decode("ascii", "ignore"))
        # A meta tag claiming UTF-16 was read as ASCII, so it cannot be right (WHATWG rule).
        if from_meta and not from_meta.startswith("utf-16"):
            return from_meta
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    best = charset_normalizer.from_bytes(body[:_DETECT_BYTES]).best()
    detected = normalize_charset(best.encoding) if best is not None else None
    return detected or "utf-8"


def decode_html(body: bytes, content_type: str | None = None) -> DecodedPage:
    """Decode a page; never raises. A BOM is dropped from the text."""
    charset = sniff_charset(body, content_type)
    for bom, name in _BOMS:
        if name == charset and body.startswith(bom):
            body = body[len(bom):]
    return DecodedPage(body.decode(charset, errors="replace"), charset)
