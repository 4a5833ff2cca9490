"""Decoding a page's bytes (crawl_platform.parse.encoding): any bytes with any declared charset
decode, in bounded time, and a label that names no page encoding is ignored as browsers ignore it."""

from __future__ import annotations

import codecs
import encodings
import encodings.aliases
import pkgutil
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl_platform.parse.encoding import decode_html, normalize_charset

# Every codec name and alias Python knows, the modules of the encodings package among them
# (idna, punycode, undefined: codecs that raise on errors="replace").
PYTHON_LABELS = sorted({*encodings.aliases.aliases, *encodings.aliases.aliases.values(),
                        *(m.name for m in pkgutil.iter_modules(encodings.__path__))} - {"aliases"})
HOSTILE_LABELS = ["idna", "punycode", "undefined", "unicode_escape", "raw_unicode_escape", "utf-7", "rot13",
                  "base64", "zlib", "uu", "hex", "mbcs", "utf-32"]
TEXT = "Grüße — café"


def test_every_python_codec_name_is_known_here():
    assert {"idna", "punycode", "undefined", "base64_codec", "utf_8", "cp1252"} <= set(PYTHON_LABELS)
    assert len(PYTHON_LABELS) > 300


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_a_label_of_a_codec_no_page_is_in_is_ignored_in_the_header_and_in_meta(label):
    body = f"<html><head><title>{TEXT}</title></head><body><p>{TEXT}</p></body></html>".encode()
    in_header = decode_html(body, f"text/html; charset={label}")
    assert (in_header.charset, TEXT in in_header.text) == ("utf-8", True)
    meta = f'<html><head><meta charset="{label}"><title>{TEXT}</title></head><body>{TEXT}</body></html>'.encode()
    in_meta = decode_html(meta, "text/html")
    assert (in_meta.charset, TEXT in in_meta.text) == ("utf-8", True)
    assert normalize_charset(label) is None


def test_labels_of_the_encoding_standard_still_choose_their_codec():
    cyrillic = "Съешь же ещё этих мягких булок"
    body = f"<title>{cyrillic}</title>".encode("cp1251")
    assert decode_html(body, "text/html; charset=windows-1251").text == f"<title>{cyrillic}</title>"
    assert {label: normalize_charset(label) for label in
            ("utf-8", "iso-8859-1", "gb2312", "shift_jis", "euc-kr", "koi8-r", "x-mac-cyrillic", "utf-16")} == {
        "utf-8": "utf-8", "iso-8859-1": "cp1252", "gb2312": "gb18030", "shift_jis": "cp932", "euc-kr": "cp949",
        "koi8-r": "koi8-r", "x-mac-cyrillic": "mac-cyrillic", "utf-16": "utf-16-le"}


@settings(max_examples=400, deadline=None)
@given(body=st.binary(max_size=2048), label=st.one_of(st.sampled_from(PYTHON_LABELS), st.text(max_size=40)),
       where=st.sampled_from(["header", "meta", "both"]))
def test_any_bytes_with_any_declared_charset_decode(body, label, where):
    if where != "header":
        body = f'<meta charset="{label}">'.encode("utf-8", "surrogatepass") + body
    content_type = f"text/html; charset={label}" if where != "meta" else "text/html"
    decoded = decode_html(body, content_type)
    assert isinstance(decoded.text, str)
    codecs.lookup(decoded.charset)  # a codec name Python knows


@pytest.mark.parametrize("label", PYTHON_LABELS)
def test_every_python_codec_label_decodes_a_large_page_in_bounded_time(label):
    """Worst case for detection too: 512 KB of bytes that are no valid UTF-8."""
    body = b"<html><body>" + bytes(range(128, 256)) * 4096 + b"</body></html>"
    started = time.process_time()
    decoded = decode_html(body, f"text/html; charset={label}")
    assert isinstance(decoded.text, str)
    assert time.process_time() - started < 2.0
