"""The certificate authorities a rendering browser trusts besides Chromium's own roots.

``CRAWL_TLS_CA_FILE`` names a PEM file of CAs (an intranet's private CA) that the fetcher trusts
besides certifi's bundle (:mod:`crawl_platform.fetch.transport`); the browsers that render the same
pages trust them too, the way Chromium on Linux takes local trust anchors: from the NSS database in
``$HOME/.pki/nssdb``. :func:`nss_home` makes a home folder whose database holds each CA of the file
as a trusted issuer of server certificates, and the browsers are started with ``HOME`` set to it.
Chromium still checks every certificate (chain, names, dates); nothing is exempted from checking.
Made with NSS's ``certutil`` (Debian: ``libnss3-tools``), needed only when the setting is set.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CERTUTIL_HINT = "install NSS's certutil (Debian: apt-get install libnss3-tools)"
_PEM_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def trust_problem(ca_file: str) -> str | None:
    """Why the browsers cannot be made to trust ``ca_file``, in one line; None when they can."""
    if ca_file and shutil.which("certutil") is None:
        return f"rendering with CRAWL_TLS_CA_FILE needs certutil: {CERTUTIL_HINT}"
    return None


def nss_home(ca_file: str) -> str:
    """A new folder to start the browsers with as ``HOME``, whose NSS database trusts every CA of
    ``ca_file`` for servers; the caller removes it. Raises RuntimeError with certutil's reason."""
    home = tempfile.mkdtemp(prefix="crawl-render-home-")
    database = Path(home, ".pki", "nssdb")
    database.mkdir(parents=True)
    blocks = _PEM_BLOCK.findall(Path(ca_file).read_text(encoding="ascii", errors="replace"))
    try:
        _certutil("-N", "-d", f"sql:{database}", "--empty-password")
        for number, block in enumerate(blocks):
            _certutil("-A", "-d", f"sql:{database}", "-n", f"crawl-ca-{number}", "-t", "C,,", "-a",
                      stdin=block + "\n")
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    return home


def _certutil(*args: str, stdin: str = "") -> None:
    executable = shutil.which("certutil")
    if executable is None:
        raise RuntimeError(f"certutil not found: {CERTUTIL_HINT}")
    done = subprocess.run([executable, *args], input=stdin, capture_output=True, text=True, timeout=30,
                          check=False)
    if done.returncode != 0:
        reason = " ".join((done.stderr or done.stdout).split())[:300]
        raise RuntimeError(f"certutil {args[0]} failed: {reason}")
