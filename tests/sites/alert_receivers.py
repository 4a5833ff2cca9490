"""Where the alerting tests send alerts: a webhook receiver and an SMTP server, both on loopback.

`WebhookReceiver` is a threading `http.server` that records every POST (path, content type, JSON
body) and answers with the status the test sets (`status = 500` plays a broken Slack).
`SMTPReceiver` is an aiosmtpd server that records every message it accepts; with `login` set it
accepts only that user and password (AUTH over plain SMTP, as a loopback relay allows).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.sites import dead_port


@dataclass
class Posted:
    path: str
    content_type: str
    body: Any


class WebhookReceiver:
    """A loopback webhook: ``url``, the POSTs it saw in ``posts``, and the ``status`` it answers."""

    def __init__(self) -> None:
        self.posts: list[Posted] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.posts.append(Posted(self.path, self.headers.get("Content-Type", ""), json.loads(raw)))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/alerts"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def texts(self) -> list[str]:
        return [p.body["text"] for p in self.posts]

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    message: Message


@dataclass
class _Handler:
    mails: list[Mail] = field(default_factory=list)

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802 -- aiosmtpd's hook name
        self.mails.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


class SMTPReceiver:
    """A loopback SMTP server: ``host``/``port``, the accepted messages in ``mails``."""

    def __init__(self, login: tuple[str, str] | None = None) -> None:
        self.handler = _Handler()
        self.host, self.port = "127.0.0.1", dead_port()
        self.logins: list[str] = []
        options: dict[str, Any] = {}
        if login is not None:
            def authenticate(_server: Any, _session: Any, _envelope: Any, _mechanism: str, data: Any) -> AuthResult:
                ok = isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == login
                if ok:
                    self.logins.append(data.login.decode())
                return AuthResult(success=ok, handled=False)

            options = {"authenticator": authenticate, "auth_require_tls": False, "auth_required": True}
        self.controller = Controller(self.handler, hostname=self.host, port=self.port, **options)

    @property
    def mails(self) -> list[Mail]:
        return self.handler.mails

    def __enter__(self) -> SMTPReceiver:
        self.controller.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.controller.stop()
