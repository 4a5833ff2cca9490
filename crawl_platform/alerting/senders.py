"""Where alerts go: a Slack-compatible webhook, e-mail over SMTP, or both.

Each sender delivers one :class:`~.alerts.Alert` or raises :class:`AlertDeliveryError` with a
one-line reason. :class:`Notifier` holds the configured senders (``CRAWL_ALERT_WEBHOOK_URL``,
``CRAWL_ALERT_SMTP_*``, ``CRAWL_ALERT_EMAIL_*``) and tries every one; an alert counts as sent once
any channel took it. One that no channel took is kept and sent again later (the caller's cursor,
or an :class:`AlertOutbox` for alerts about events seen once, such as a failed run), so a webhook
that is down delays alerts instead of losing them. The webhook body is ``{"text": ...}``, which
Slack, Mattermost and Rocket.Chat incoming webhooks accept; the e-mail is plain text.

Secrets stay out of the errors, which the sensors log: a webhook URL's path is its bearer token
(Slack's ``/services/...``), so an error names the webhook by scheme and host alone and has the
URL taken out of the HTTP client's text; the SMTP password is never shown. STARTTLS checks the
server's certificate against the system's CAs (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` add a private
CA) and its name against the configured host, so the password goes to no one else.
"""

from __future__ import annotations

import json
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Protocol

import requests

from crawl_platform.alerting.alerts import Alert
from crawl_platform.config import Settings
from crawl_platform.redaction import redact_url_path, scrub, url_secrets

SEND_TIMEOUT_S = 10.0


class AlertDeliveryError(RuntimeError):
    """An alert could not be delivered on a channel (the message says which and why, one line)."""


class AlertSender(Protocol):
    """One channel. ``send`` returns once the receiver accepted the alert, else raises
    :class:`AlertDeliveryError`."""

    name: str

    def send(self, alert: Alert) -> None: ...


class WebhookSender:
    """POSTs ``{"text": alert.text}`` as JSON; any 2xx answer is a delivery."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float = SEND_TIMEOUT_S) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def send(self, alert: Alert) -> None:
        try:
            response = requests.post(self.url, json={"text": alert.text}, timeout=self.timeout_s)
        except requests.RequestException as err:
            raise AlertDeliveryError(self._error(f"{type(err).__name__}: {err}")) from None
        if not 200 <= response.status_code < 300:
            raise AlertDeliveryError(self._error(f"HTTP {response.status_code} {response.text[:200]!r}"))

    def _error(self, reason: str) -> str:
        """One line naming the webhook without its secret path, which ``reason`` loses as well
        (requests quotes the URL's path in a connection error)."""
        return f"webhook {redact_url_path(self.url)}: {scrub(' '.join(reason.split()), url_secrets(self.url))}"


class EmailSender:
    """Mails the alert's text, its subject line as the subject, through one SMTP server."""

    name = "email"

    def __init__(self, host: str, port: int, sender: str, recipients: list[str], *, user: str = "",
                 password: str = "", starttls: bool = False, timeout_s: float = SEND_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.sender = sender
        self.recipients = recipients
        self.user = user
        self._password = password
        self.starttls = starttls
        self.timeout_s = timeout_s

    def message(self, alert: Alert) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = alert.subject
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients)
        mail.set_content(alert.text + "\n")
        return mail

    def send(self, alert: Alert) -> None:
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout_s) as smtp:
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self.user:
                    smtp.login(self.user, self._password)
                smtp.send_message(self.message(alert))
        except ssl.SSLCertVerificationError as err:
            raise AlertDeliveryError(f"e-mail via {self.host}:{self.port}: the server's certificate did not verify "
                                     f"({err.verify_message}); SSL_CERT_FILE names a CA file to trust") from None
        except (OSError, smtplib.SMTPException) as err:
            raise AlertDeliveryError(f"e-mail via {self.host}:{self.port}: {type(err).__name__}: {err}") from None


@dataclass
class Delivery:
    """What happened to one alert: the channels that took it and one line per channel that failed."""

    delivered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Sent on some channel, or no channel is configured (then there is nothing to retry)."""
        return bool(self.delivered) or not self.errors


class Notifier:
    """Every configured channel; :meth:`send` tries each."""

    def __init__(self, senders: list[AlertSender]) -> None:
        self.senders = senders

    @classmethod
    def from_settings(cls, settings: Settings) -> Notifier:
        senders: list[AlertSender] = []
        if settings.alert_webhook_url:
            senders.append(WebhookSender(settings.alert_webhook_url))
        if settings.alert_smtp_host and settings.alert_email_to:
            senders.append(EmailSender(
                settings.alert_smtp_host, settings.alert_smtp_port, settings.alert_email_from,
                list(settings.alert_email_to), user=settings.alert_smtp_user,
                password=settings.alert_smtp_password.get_secret_value(), starttls=settings.alert_smtp_starttls))
        return cls(senders)

    @property
    def configured(self) -> bool:
        return bool(self.senders)

    def send(self, alert: Alert) -> Delivery:
        delivery = Delivery()
        for sender in self.senders:
            try:
                sender.send(alert)
            except AlertDeliveryError as err:
                delivery.errors.append(str(err))
            else:
                delivery.delivered.append(sender.name)
        return delivery


@dataclass
class AlertOutbox:
    """Alerts no channel took yet, oldest first; stored as JSON wherever the caller keeps state."""

    alerts: list[Alert] = field(default_factory=list)

    MAX_ALERTS = 500  # an outage longer than this many alerts keeps the newest

    @classmethod
    def decode(cls, raw: str | None) -> AlertOutbox:
        try:
            return cls([Alert.from_json(item) for item in json.loads(raw or "[]")])
        except (ValueError, TypeError):
            return cls()

    def encode(self) -> str:
        return json.dumps([alert.to_json() for alert in self.alerts[-self.MAX_ALERTS:]])

    def park(self, alert: Alert) -> None:
        self.alerts.append(alert)

    def flush(self, notifier: Notifier) -> tuple[int, list[str]]:
        """Send the parked alerts in order until one is not taken (the channels are still down:
        trying the rest would only wait out more timeouts); keep that one and the rest. Returns
        how many went out and the channels' errors."""
        sent = 0
        for alert in self.alerts:
            delivery = notifier.send(alert)
            if not delivery.ok:
                self.alerts = self.alerts[sent:]
                return sent, delivery.errors
            sent += 1
        self.alerts = []
        return sent, []
