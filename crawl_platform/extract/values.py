"""Turning a field's cleaned text into its declared type, or saying in one short line why not.

The extraction engine (:mod:`crawl_platform.extract.engine`) calls :func:`convert` with the text a
selector found, after ``strip`` and ``regex``; a :class:`TypeMismatchError` becomes the field's NULL and
its ``type:`` error note. Values come out JSON-ready, as the ``records.fields`` column keeps them:
a date is its ISO ``YYYY-MM-DD`` string (the typed records view casts it back to ``DATE``).
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime

from crawl_platform.extract.rules import FieldType

_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
# Thousands separators a number may carry ("1,234", "1_234", "1 234" with a narrow no-break space).
_SEPARATORS = re.compile(r"[,_\u202f\u00a0 ](?=\d{3}(?:\D|$))")


class TypeMismatchError(ValueError):
    """The text is not a value of the field's type; ``str(err)`` is the note (``'x' is not an int``)."""


def _quote(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _number(text: str) -> str:
    return _SEPARATORS.sub("", text.strip())


def to_int(text: str) -> int:
    cleaned = _number(text)
    try:
        return int(cleaned)
    except ValueError:
        pass
    try:
        value = float(cleaned)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value.is_integer():
        return int(value)
    raise TypeMismatchError(f"{_quote(text)} is not an int")


def to_float(text: str) -> float:
    try:
        value = float(_number(text))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TypeMismatchError(f"{_quote(text)} is not a finite float")
    return value


def to_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise TypeMismatchError(f"{_quote(text)} is not a bool (true/false, yes/no, on/off, 1/0)")


def to_date(text: str, date_format: str | None = None) -> str:
    """The ISO date of ``text``: by ``date_format`` (strptime) when given, else ISO 8601, else any
    format python-dateutil reads (``October 07, 2026``, ``7 Oct 2026``)."""
    stripped = text.strip()
    if date_format is not None:
        try:
            return datetime.strptime(stripped, date_format).date().isoformat()
        except ValueError:
            raise TypeMismatchError(f"{_quote(text)} is not a date in the format {date_format!r}") from None
    try:
        return date.fromisoformat(stripped).isoformat()
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(stripped).date().isoformat()
    except ValueError:
        pass
    from dateutil import parser  # noqa: PLC0415 - only non-ISO dates need it

    try:
        parsed: datetime = parser.parse(stripped)
        return parsed.date().isoformat()
    except (ValueError, OverflowError):
        raise TypeMismatchError(f"{_quote(text)} is not a date") from None


def convert(text: str, field_type: FieldType, date_format: str | None = None) -> str | int | float | bool:
    """``text`` as a value of ``field_type`` (not ``list``: a list's items are strings)."""
    if field_type == "int":
        return to_int(text)
    if field_type == "float":
        return to_float(text)
    if field_type == "bool":
        return to_bool(text)
    if field_type == "date":
        return to_date(text, date_format)
    return text
