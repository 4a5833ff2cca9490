"""Turns the bytes of a fetched page into text: which charset, and decoding that never fails.

Order of evidence, as browsers do it: a byte-order mark, then the ``charset`` of the
Content-Type header, then a ``<meta charset>`` / ``<meta http-equiv="Content-Type">`` near the
top of the document, then strict UTF-8, then statistical detection (charset_normalizer, which
comes with requests). Labels are mapped the way the WHATWG Encoding standard maps them, so a
page that says ``gb2312`` but uses GB18030 characters, or ``iso-8859-1`` with Windows-1252
quotes, still decodes to the right text. A declared label counts only when it names one of the
Standard's encodings: a page is untrusted input, and Python also knows codecs that are no page
encoding (``idna``, ``punycode`` and ``undefined`` cannot even decode with ``errors="replace"``,
``unicode_escape`` reads backslashes), so any other label is ignored as browsers ignore it. Bytes
that are invalid in the chosen charset become U+FFFD: a page with broken bytes lands with readable
text rather than not at all. The parser (:mod:`crawl_platform.parse.html`) calls
:func:`decode_html`; landing stores the charset it chose.
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
_ALIASES = {"x-gbk": "gbk", "x-sjis": "shift_jis", "x-user-defined": "cp1252", "x-mac-cyrillic": "mac-cyrillic",
            "windows-874": "cp874", "x-mac-roman": "mac-roman"}
# The Python codecs of the WHATWG Encoding Standard's encodings (after _SUPERSETS): the only ones
# a declared label may choose. Its "replacement" encoding (ISO-2022-KR, HZ and the like) is left
# out: such a label is ignored and detection reads the bytes.
_WEB_CODECS = frozenset({
    "utf-8", "utf-16-le", "utf-16-be", "cp866", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5", "iso8859-6",
    "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15", "iso8859-16", "koi8-r",
    "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255",
    "cp1256", "cp1257", "cp1258", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949",
})


@dataclass(frozen=True)
class DecodedPage:
    text: str
    charset: str  # the Python codec name used, e.g. "utf-8", "gb18030", "cp1252"


def charset_of(content_type: str | None) -> str | None:
    """The raw ``charset`` label of a Content-Type header value, if any."""
    match = _HEADER_CHARSET.search(content_type or "")
    return match.group(1) if match else None


def normalize_charset(label: str | None) -> str | None:
    """The Python codec of a page's declared charset label, or None when the label names no
    encoding of the WHATWG Encoding Standard (unknown, or a Python codec no page is in)."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    name = _SUPERSETS.get(name, name)
    return name if name in _WEB_CODECS else None


def _detected(name: str | None) -> str | None:
    """The codec charset_normalizer found, as a name :func:`decode_html` uses: a label of the
    Standard maps as a declared one does; another codec it decoded the bytes with is kept."""
    if not name:
        return None
    try:
        codec = codecs.lookup(name)
    except LookupError:
        return None
    return normalize_charset(name) or (codec.name if codec._is_text_encoding else None)


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
    return _detected(best.encoding if best is not None else None) or "utf-8"


def decode_html(body: bytes, content_type: str | None = None) -> DecodedPage:
    """Decode a page; never raises, whatever the bytes and the declared charset. A BOM is
    dropped from the text."""
    charset = sniff_charset(body, content_type)
    for bom, name in _BOMS:
        if name == charset and body.startswith(bom):
            body = body[len(bom):]
    try:
        return DecodedPage(body.decode(charset, errors="replace"), charset)
    except (UnicodeError, LookupError):  # a detected codec that fails after all: UTF-8 never does
        return DecodedPage(body.decode("utf-8", errors="replace"), "utf-8")
