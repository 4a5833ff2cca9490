"""A page on loopback whose script reaches for what a rendering browser keeps off, and writes what it got.

``/sandbox`` starts two downloads (a click on an ``<a download>`` of ``/download/file.bin``, and an
iframe of ``/download/attachment``, served with ``Content-Disposition: attachment``), opens two
pop-ups (``window.open('/popup')`` and a click on an ``<a target=_blank>`` of ``/popup-link``),
registers a service worker (``/sw.js``) from the page and from a fresh iframe's own realm, and asks
for permissions (notifications, geolocation, the clipboard). Each outcome goes into the page's DOM
as ``<li data-probe="NAME">WHAT</li>``, and ``<body data-done>`` once every one has answered, so a
test reads them from the rendered DOM. Both downloads' bodies hold :data:`DOWNLOAD_MARKER`, so a
test can look for it on disk. Every request is recorded as a ``Seen``.
"""

from __future__ import annotations

from typing import Any

from crawl_platform.cli.recording_server import RecordingServer
from tests.sites import Seen, SeenHandler

DOWNLOAD_MARKER = b"crawl-platform-download-marker:"
POPUPS = ("/popup", "/popup-link")

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>sandbox</title></head><body>
<h1>Sandbox</h1><ul id="probes"></ul>
<iframe src="/download/attachment"></iframe>
<script>
function report(name, value) {
  const li = document.createElement('li');
  li.dataset.probe = name;
  li.textContent = String(value);
  document.getElementById('probes').appendChild(li);
}
function probe(name, promise) {
  return promise.then(v => report(name, v), e => report(name, 'refused: ' + e.name));
}
function click(href, attributes) {
  const a = document.createElement('a');
  a.href = href;
  Object.assign(a, attributes);
  document.body.appendChild(a);
  a.click();
}
click('/download/file.bin', {download: 'file.bin'});
report('window.open', window.open('/popup') === null ? 'null' : 'a window');
click('/popup-link', {target: '_blank'});
const probes = [];
if (navigator.serviceWorker) {
  probes.push(probe('serviceWorker.register',
                    navigator.serviceWorker.register('/sw.js').then(r => r ? 'a registration' : 'none')));
  const realm = document.body.appendChild(document.createElement('iframe')).contentWindow;
  probes.push(probe('serviceWorker.register from another realm',
                    realm.ServiceWorkerContainer.prototype.register.call(navigator.serviceWorker, '/sw.js?realm')
                      .then(r => r ? 'a registration' : 'none')));
} else {
  report('serviceWorker.register', 'no navigator.serviceWorker');
}
probes.push(probe('Notification.requestPermission', Notification.requestPermission()));
for (const name of ['notifications', 'geolocation', 'clipboard-read'])
  probes.push(probe('permissions.query ' + name, navigator.permissions.query({name}).then(s => s.state)));
probes.push(probe('geolocation.getCurrentPosition', new Promise((done, fail) =>
  navigator.geolocation.getCurrentPosition(() => done('a position'), e => done('error code ' + e.code),
                                           {timeout: 5000}))));
probes.push(probe('clipboard.readText', navigator.clipboard.readText().then(() => 'read')));
Promise.allSettled(probes)
  .then(() => navigator.serviceWorker ? navigator.serviceWorker.getRegistrations() : [])
  .then(registrations => {
    report('serviceWorker.getRegistrations', registrations.length);
    document.body.dataset.done = 'yes';
  });
</script></body></html>
"""

SERVICE_WORKER = b"self.addEventListener('fetch', event => event.respondWith(new Response('from the worker')));"


class _Handler(SeenHandler):
    def __init__(self, site: SandboxSite, *args: Any) -> None:
        self.site = site  # set first: the base class answers the request inside __init__
        super().__init__(*args)

    def answer(self, seen: Seen) -> None:
        status, headers, body = self.site.page(seen.path)
        self.reply(seen, status, body, headers)


class SandboxSite(RecordingServer[Seen]):
    """The sandbox page and what its script asks for, on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__(lambda *args: _Handler(self, *args), name="sandbox-site", lifetime_s=300)
        self.start()

    @property
    def url(self) -> str:
        return self.base_url + "/sandbox"

    def page(self, target: str) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of ``target``."""
        path = target.split("?", 1)[0]
        if path == "/sandbox":
            return 200, {"Content-Type": "text/html; charset=utf-8"}, PAGE.encode()
        if path in ("/download/file.bin", "/download/attachment"):
            body = DOWNLOAD_MARKER + b"x" * 64 * 1024
            return 200, {"Content-Type": "application/octet-stream",
                         "Content-Disposition": f'attachment; filename="{path.rsplit("/", 1)[1]}"'}, body
        if path == "/sw.js":
            return 200, {"Content-Type": "application/javascript"}, SERVICE_WORKER
        if path in POPUPS:
            return 200, {"Content-Type": "text/html"}, b"<title>a pop-up</title>"
        return 404, {"Content-Type": "text/plain"}, b"not found"
