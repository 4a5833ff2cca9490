"""Secrets kept out of what people see: passwords in URLs and connection strings, secret URL paths.

Some settings carry a secret inside an address: a Celery broker URL or a proxy URL with its
password, a PostgreSQL catalog's connection string (``password=...`` or
``postgresql://user:password@host/db``), a webhook URL whose path is its bearer token (Slack's
``/services/...``). The code uses them as they are and shows them only through these functions,
in errors, logs, run metadata, backups and the command line's output. What is shown still says
which server is meant (scheme, user, host, port, database) and nothing that lets a reader act in
the owner's name. Libraries echo such addresses in their errors (DuckDB repeats a catalog's whole
connection string, requests the URL's path), so an error about one passes through :func:`scrub`
with the secrets of the address it used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

MASK = "***"

_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<secret>[^/\s@]*)@", re.I)
# libpq's key=value form: a value is a run of non-blanks or single-quoted with backslash escapes.
# sslpassword unlocks a client key, so it is as secret as password. In text around it (an error) an
# unquoted value also ends at a double quote, which DuckDB puts around the connection string it echoes.
_KEY = r"(?P<key>(?<![\w?&.-])(?:ssl)?password\s*=\s*)"
_KEY_VALUE = re.compile(_KEY + r"(?P<secret>'(?:[^'\\]|\\.)*'|[^\s']+)", re.I)
_KEY_VALUE_IN_TEXT = re.compile(_KEY + r"(?P<secret>'(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.I)
_MASKED = re.compile(re.escape(MASK) + r"[:;,.)\]]*")
_QUERY = re.compile(r"(?P<key>[?&](?:ssl)?password=)(?P<secret>[^&\s#'\"]*)", re.I)


def redact_passwords(text: str) -> str:
    """``text`` with every password of a URL (``scheme://user:secret@``, ``?password=secret``) or a
    libpq connection string (``password=secret``) replaced by ``***``, wherever it occurs."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{MASK}@", text)
    text = _QUERY.sub(lambda m: f"{m.group('key')}{MASK}", text)
    return _KEY_VALUE_IN_TEXT.sub(_masked_value, text)


def _masked_value(match: re.Match[str]) -> str:
    # A value masked already keeps the punctuation after it ("password=***: connection refused").
    if _MASKED.fullmatch(match.group("secret")):
        return match.group(0)
    return f"{match.group('key')}{MASK}"


def passwords(connection: str) -> list[str]:
    """The passwords written in ``connection`` (a URL or a libpq connection string), each as
    written and unquoted or percent-decoded, for :func:`scrub`."""
    found: list[str] = []
    for pattern in (_USERINFO, _QUERY, _KEY_VALUE):
        for match in pattern.finditer(connection):
            secret = match.group("secret")
            found.append(secret)
            if secret.startswith("'") and secret.endswith("'") and len(secret) > 1:
                found.append(re.sub(r"\\(.)", r"\1", secret[1:-1]))
            found.append(unquote(secret))
    return [s for s in dict.fromkeys(found) if s and s != MASK]


def redact_url_path(url: str) -> str:
    """``url`` as its scheme, host and port, with ``/…`` standing for a path, query or fragment
    (they are the secret of a webhook URL) and no user or password."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return MASK
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port is not None else ""
    rest = "/…" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def url_secrets(url: str) -> list[str]:
    """What of ``url`` :func:`scrub` removes from an error about it: the URL, its path and query
    (together and apart) and its password."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    pieces = [url, target, parts.path, parts.query, *passwords(url)]
    return [p for p in pieces if p.strip("/?")]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` replaced by ``***`` (longest first, so
    a secret that contains another goes whole), then :func:`redact_passwords`."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return redact_passwords(text)
