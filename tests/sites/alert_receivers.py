"""Where the alerting tests send alerts: a webhook receiver and an SMTP server, both on loopback.

`WebhookReceiver` is a threading `http.server` that records every POST (path, content type, JSON
body) and answers with the status the test sets (`status = 500` plays a broken Slack).
`SMTPReceiver` is an aiosmtpd server that records every message it accepts; with `login` set it
accepts only that user and password (AUTH over plain SMTP, as a loopback relay allows), and with
`tls` (a `LoopbackCertificate`) it requires STARTTLS on a certificate of a test CA no system
trusts: `LoopbackCertificate` makes that CA and a certificate it signed for 127.0.0.1.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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
    """A loopback webhook at ``path``: ``url``, the POSTs it saw in ``posts``, and the ``status`` it
    answers (any path reaches it)."""

    def __init__(self, path: str = "/hooks/alerts") -> None:
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
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
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


class LoopbackCertificate:
    """A test CA (``ca_file``) and a certificate it signed for the IP address 127.0.0.1
    (``cert_file``, its key in ``key_file``), written into ``folder``."""

    def __init__(self, folder: Path) -> None:
        from cryptography import x509  # noqa: PLC0415 - only the TLS tests need it
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
        from cryptography.x509.oid import NameOID  # noqa: PLC0415

        now = datetime.datetime.now(datetime.UTC)

        def name(common_name: str) -> x509.Name:
            return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

        def signed(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey,
                   *, ca: bool) -> x509.Certificate:
            builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                       .public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5))
                       .not_valid_after(now + datetime.timedelta(days=1))
                       .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
            if ca:
                builder = builder.add_extension(x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                    decipher_only=False), critical=True)
                builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                                critical=False)
            else:
                builder = builder.add_extension(
                    x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    issuer_key.public_key()), critical=False)
            return builder.sign(issuer_key, hashes.SHA256())

        ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca = signed("crawl-platform test CA", ca_key, "crawl-platform test CA", ca_key, ca=True)
        server = signed("127.0.0.1", server_key, "crawl-platform test CA", ca_key, ca=False)
        self.ca_file, self.cert_file, self.key_file = folder / "ca.pem", folder / "server.pem", folder / "server.key"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(server_key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


class SMTPReceiver:
    """A loopback SMTP server: ``host``/``port``, the accepted messages in ``mails``; with ``tls``,
    only over STARTTLS with that certificate."""

    def __init__(self, login: tuple[str, str] | None = None, tls: LoopbackCertificate | None = None) -> None:
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
        if tls is not None:
            options.update(tls_context=tls.server_context(), require_starttls=True)
        self.controller = Controller(self.handler, hostname=self.host, port=self.port, **options)

    @property
    def mails(self) -> list[Mail]:
        return self.handler.mails

    def __enter__(self) -> SMTPReceiver:
        self.controller.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.controller.stop()
