"""A single-page-app shop on loopback whose content and links exist only once its JavaScript ran.

Every HTML page is the same app shell (a title, an empty ``<div id="app">`` and ``/app.js``); the
script asks ``/api/page?path=<its path>`` for JSON and builds the page from it: a product's
``<h1 class="name">`` and ``<span class="price">``, and links to the other pages. Fetched over
HTTP, no page has a link or a product. ``SpaSite(products=N)`` has ``/`` and ``/product/1..N``.

With ``traps=True`` three more pages are linked from ``/``: ``/trap/private``, whose script asks for
the cloud metadata address, for the ``secret`` server on 127.0.0.2 (a loopback address a test
guard does not allow), for ``/go-private``, a redirect to that server, and for
``/private-api/orders``, which robots.txt disallows; ``/trap/spin``, whose
script polls for ever (the network never settles); and ``/trap/busy``, whose script never returns.
Every request is recorded as a ``Seen`` (the secret server's too, so a test sees it was never reached).

With ``robots_trap=True`` ``/`` also links ``/trap/robots``, whose script asks for
``/private-api/stock`` (robots.txt disallows it), and with ``elsewhere`` (another host's base URL,
another ``SpaSite``) for ``<elsewhere>/private-api/stock`` and ``<elsewhere>/app.js`` too, and then
builds its page like any other. With
``tls`` (a :class:`~tests.sites.alert_receivers.LoopbackCertificate`) the site is served over HTTPS
with that certificate, and ``base_url`` is ``https://127.0.0.1:<port>``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler

if TYPE_CHECKING:
    from tests.sites.alert_receivers import LoopbackCertificate

SHELL = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<script src="/app.js" defer></script></head><body><div id="app"></div>{extra}</body></html>"""

APP_JS = """
fetch('/api/page?path=' + encodeURIComponent(location.pathname))
  .then(r => r.json())
  .then(d => {
    document.title = d.title;
    const app = document.getElementById('app');
    let html = '<h1 class="name">' + d.name + '</h1>';
    if (d.price) html += '<p>Price: <span class="price">' + d.price + '</span></p>';
    html += '<p class="blurb">' + d.blurb + '</p><ul>';
    for (const link of d.links) html += '<li><a href="' + link + '">' + link + '</a></li>';
    app.innerHTML = html + '</ul>';
  });
"""

PRIVATE_JS = """
for (const url of ['http://169.254.169.254/latest/meta-data/', '{secret}/from-script', '/go-private',
                   '/private-api/orders'])
  fetch(url).catch(() => null);
"""
ROBOTS_JS = "for (const url of {urls}) fetch(url).catch(() => null);"
SPIN_JS = "setInterval(() => fetch('/api/poll?' + Date.now()).catch(() => null), 150);"
BUSY_JS = "for (;;) {}"

RULES = """fields:
  name: {selector: "h1.name", required: true}
  price: {selector: "span.price", type: float, required: true}
url_pattern: "/product/"
"""


class _Handler(SeenHandler):
    site: SpaSite

    def answer(self, seen: Seen) -> None:
        status, kind, body, headers = self.site.page(seen.path)
        seen.status = status
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class _SecretHandler(SeenHandler):
    def answer(self, seen: Seen) -> None:
        body = b"the secret"
        seen.status = 200
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SpaSite(RecordingServer[Seen]):
    def __init__(self, products: int = 8, *, traps: bool = False, robots_trap: bool = False, elsewhere: str = "",
                 tls: LoopbackCertificate | None = None) -> None:
        site = self

        class Handler(_Handler):
            def __init__(self, *args: Any) -> None:
                self.site = site
                super().__init__(*args)

        super().__init__(Handler, name="spa-site", lifetime_s=600)
        if tls is not None:  # the handshake happens in the handler's thread, on its first read
            self._server.socket = tls.server_context().wrap_socket(self._server.socket, server_side=True,
                                                                   do_handshake_on_connect=False)
            self.base_url = f"https://{self.host}:{self.port}"
        self.products = products
        self.traps = traps
        self.robots_trap = robots_trap
        self.elsewhere = elsewhere
        self.secret: RecordingServer[Seen] | None = None
        if traps:
            self.secret = RecordingServer(_SecretHandler, host="127.0.0.2", name="spa-secret", lifetime_s=600)
            self.secret.start()
        self.start()

    def close(self) -> None:
        if self.secret is not None:
            self.secret.close()
        super().close()

    @property
    def pages(self) -> list[str]:
        """Every page's URL: what a crawl that runs the script finds."""
        paths = ["/", *(f"/product/{n}" for n in range(1, self.products + 1))]
        if self.traps:
            paths += ["/trap/private", "/trap/spin", "/trap/busy"]
        if self.robots_trap:
            paths.append("/trap/robots")
        return [self.base_url + p for p in paths]

    def page(self, target: str) -> tuple[int, str, bytes, dict[str, str]]:
        parts = urlsplit(target)
        path = parts.path
        html = "text/html; charset=utf-8"
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nDisallow: /private-api/\n", {}
        if path == "/app.js":
            return 200, "application/javascript", APP_JS.encode(), {}
        if path == "/api/page":
            data = self._data(parse_qs(parts.query).get("path", ["/"])[0])
            if data is None:
                return 404, "application/json", b"{}", {}
            return 200, "application/json", json.dumps(data).encode(), {}
        if path == "/api/poll":
            return 200, "application/json", b"{}", {}
        if path == "/go-private" and self.secret is not None:
            return 302, "text/plain", b"", {"Location": f"{self.secret.base_url}/redirected"}
        if path == "/trap/private" and self.secret is not None:
            script = PRIVATE_JS.replace("{secret}", self.secret.base_url)
            return 200, html, SHELL.format(title="private", extra=f"<script>{script}</script>").encode(), {}
        if path == "/trap/robots" and self.robots_trap:
            urls = ["/private-api/stock", *([f"{self.elsewhere}/private-api/stock", f"{self.elsewhere}/app.js"]
                                            if self.elsewhere else [])]
            script = ROBOTS_JS.replace("{urls}", json.dumps(urls))
            return 200, html, SHELL.format(title="robots", extra=f"<script>{script}</script>").encode(), {}
        if path == "/trap/spin" and self.traps:
            return 200, html, SHELL.format(title="spin", extra=f"<script>{SPIN_JS}</script>").encode(), {}
        if path == "/trap/busy" and self.traps:
            return 200, html, SHELL.format(title="busy", extra=f"<script>{BUSY_JS}</script>").encode(), {}
        if self._data(path) is not None:
            return 200, html, SHELL.format(title="loading", extra="").encode(), {}
        return 404, "text/plain", b"not found", {}

    def _data(self, path: str) -> dict[str, Any] | None:
        others = [f"/product/{n}" for n in range(1, self.products + 1)]
        if path == "/":
            links = others + (["/trap/private", "/trap/spin", "/trap/busy"] if self.traps else [])
            links += ["/trap/robots"] if self.robots_trap else []
            return {"title": "SPA shop", "name": "Shop", "blurb": "Everything this shop sells.", "links": links}
        if path.startswith("/product/") and path[9:].isdigit() and 1 <= int(path[9:]) <= self.products:
            n = int(path[9:])
            return {"title": f"Product {n}", "name": f"Product {n}", "price": f"{n * 10 + 0.5}",
                    "blurb": f"Product {n} is a fine thing to own.", "links": ["/", *others]}
        if path.startswith("/trap/") and (self.traps or (self.robots_trap and path == "/trap/robots")):
            return {"title": path, "name": path, "blurb": "A trap.", "links": ["/"]}
        return None
