"""JavaScript rendering: pages a crawl asks for seen as a browser builds them.

A crawl's ``render`` mode is ``never`` (the default), ``always`` or ``auto``. Every page is fetched
over HTTP first by :mod:`crawl_platform.fetch` (robots.txt, scope, redirects, politeness, the
network guard); the render step (:mod:`.step`) then decides which pages need a browser
(:mod:`.decision`), loads each in headless Chromium from the archived HTTP response
(:mod:`.browsers`) with every request the page makes sent through a local proxy that applies the
network guard at connect time and the host's politeness (:mod:`.guard_proxy`), and parses the
rendered DOM in place of the HTTP body. Playwright is imported only by :mod:`.browsers`, so a crawl
that renders nothing never imports it. This module finds the browser and says, in one line, what
to install when it is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from crawl_platform.render.trust import trust_problem

DEFAULT_BROWSER = "/usr/bin/chromium"
INSTALL_HINT = "install Chromium (Debian: apt-get install chromium) or set CRAWL_BROWSER_PATH"


def find_browser(browser_path: str = "") -> str | None:
    """The Chromium executable to start: ``browser_path`` if set, else ``chromium`` on ``PATH``,
    else :data:`DEFAULT_BROWSER`; None when it is not an executable file."""
    candidates = [browser_path] if browser_path else [shutil.which("chromium") or "", DEFAULT_BROWSER]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def rendering_problem(browser_path: str = "", ca_file: str = "") -> str | None:
    """Why this machine cannot render (with ``CRAWL_TLS_CA_FILE`` ``ca_file``), in one line naming
    what to install; None when it can."""
    if importlib.util.find_spec("playwright") is None:
        return "rendering needs the playwright package: pip install 'playwright==1.65.*'"
    if find_browser(browser_path) is None:
        where = f"CRAWL_BROWSER_PATH {browser_path!r} is not an executable" if browser_path else "no Chromium found"
        return f"rendering needs a browser ({where}): {INSTALL_HINT}"
    return trust_problem(ca_file)
