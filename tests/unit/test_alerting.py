"""Alerts reach a real webhook receiver and a real SMTP server on loopback; stalls alert once;
no error shows the webhook's token, and STARTTLS trusts only a certificate that verifies."""

import dataclasses
from datetime import datetime, timedelta

import pytest

from crawl_platform.alerting.alerts import UILinks, check_failed, crawl_stalled, run_failed
from crawl_platform.alerting.senders import AlertDeliveryError, AlertOutbox, EmailSender, Notifier
from crawl_platform.alerting.stalls import StallLedger, find_stalls
from crawl_platform.frontier.read_model import CrawlStatus
from tests.conftest import alert_settings
from tests.sites import dead_port
from tests.sites.alert_receivers import LoopbackCertificate, SMTPReceiver, WebhookReceiver

LINKS = UILinks("http://ui.test:3000/")
RUN_ALERT_TEXT = """[crawl-platform] Run failed: crawl_batch_job (crawl shop-1)
Crawl: shop-1
What broke: step land_batch: StoreBusyError: the lake's write lock was not free within 120 s
Batch: e0.p3-0-200
Retry: attempt 1 of 3
Run: http://ui.test:3000/runs/8f14e45f"""


def _run_alert():
    return run_failed(LINKS, job="crawl_batch_job", run_id="8f14e45f", crawls=["shop-1"],
                      error="step land_batch: StoreBusyError: the lake's write lock was not free within 120 s",
                      partition="e0.p3-0-200", retry="attempt 1 of 3")


def test_an_alert_is_posted_as_slack_json_and_mailed_to_every_recipient(store_settings, webhook, smtp_server):
    notifier = Notifier.from_settings(alert_settings(store_settings, webhook, smtp_server))
    delivery = notifier.send(_run_alert())
    assert delivery.delivered == ["webhook", "email"]
    assert delivery.errors == []
    (post,) = webhook.posts
    assert post.path == "/hooks/alerts"
    assert post.content_type == "application/json"
    assert post.body == {"text": RUN_ALERT_TEXT}
    (mail,) = smtp_server.mails
    assert mail.sender == "crawler@test.local"
    assert mail.recipients == ["ops@test.local", "oncall@test.local"]
    assert mail.message["Subject"] == "[crawl-platform] Run failed: crawl_batch_job (crawl shop-1)"
    assert mail.message["To"] == "ops@test.local, oncall@test.local"
    assert mail.message.get_payload(decode=True).decode().replace("\r\n", "\n").strip() == RUN_ALERT_TEXT


def test_a_broken_channel_is_reported_and_the_other_still_delivers(store_settings, webhook, smtp_server):
    webhook.status = 500
    delivery = Notifier.from_settings(alert_settings(store_settings, webhook, smtp_server)).send(_run_alert())
    assert delivery.delivered == ["email"]
    assert delivery.errors == [f"webhook {webhook.url.removesuffix('/hooks/alerts')}/…: HTTP 500 'ok'"]
    assert delivery.ok
    assert len(webhook.posts) == 1  # it did reach the receiver, which refused it


def test_every_channel_down_is_not_a_delivery(store_settings):
    port = dead_port()
    settings = store_settings.model_copy(update={
        "alert_webhook_url": f"http://127.0.0.1:{port}/hook", "alert_smtp_host": "127.0.0.1",
        "alert_smtp_port": port, "alert_email_to": ["ops@test.local"]})
    delivery = Notifier.from_settings(settings).send(_run_alert())
    assert not delivery.ok
    assert delivery.delivered == []
    assert [e.split(":")[0] for e in delivery.errors] == ["webhook http", "e-mail via 127.0.0.1"]
    assert all("ConnectionError" in e or "ConnectionRefusedError" in e for e in delivery.errors)


SLACK_TOKEN_PATH = "/services/T0CRAWL00/B0ALERT00/s3cretW3bhookT0ken"  # the path is the webhook's secret


def test_a_webhook_that_refuses_or_is_down_is_named_without_its_token(store_settings):
    with WebhookReceiver(SLACK_TOKEN_PATH) as webhook:
        port = webhook.server.server_address[1]
        webhook.status = 500
        refused = Notifier.from_settings(alert_settings(store_settings, webhook)).send(_run_alert())
    assert webhook.posts[0].path == SLACK_TOKEN_PATH  # the alert went to the whole URL
    assert refused.errors == [f"webhook http://127.0.0.1:{port}/…: HTTP 500 'ok'"]

    down = dead_port()
    settings = store_settings.model_copy(update={"alert_webhook_url": f"http://127.0.0.1:{down}{SLACK_TOKEN_PATH}"})
    (error,) = Notifier.from_settings(settings).send(_run_alert()).errors
    # requests names the URL's path in its error; the line keeps the cause and loses the path.
    assert error.startswith(f"webhook http://127.0.0.1:{down}/…: ConnectionError: ")
    assert "Connection refused" in error
    assert "s3cret" not in error
    assert "/services" not in error
    assert "\n" not in error


def test_starttls_sends_only_to_a_server_whose_certificate_verifies(tmp_path, monkeypatch):
    certificate = LoopbackCertificate(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with SMTPReceiver(login=("alerts", "s3cret"), tls=certificate) as server:
        def sender(host: str) -> EmailSender:
            return EmailSender(host, server.port, "crawler@test.local", ["ops@test.local"], user="alerts",
                               password="s3cret", starttls=True)

        with pytest.raises(AlertDeliveryError) as untrusted:  # a CA this machine does not trust
            sender("127.0.0.1").send(_run_alert())
        assert str(untrusted.value) == (
            f"e-mail via 127.0.0.1:{server.port}: the server's certificate did not verify (unable to get local "
            "issuer certificate); SSL_CERT_FILE names a CA file to trust")

        monkeypatch.setenv("SSL_CERT_FILE", str(certificate.ca_file))
        with pytest.raises(AlertDeliveryError) as other_name:  # trusted CA, but not the host's certificate
            sender("localhost").send(_run_alert())
        assert str(other_name.value) == (
            f"e-mail via localhost:{server.port}: the server's certificate did not verify (Hostname mismatch, "
            "certificate is not valid for 'localhost'.); SSL_CERT_FILE names a CA file to trust")
        assert (server.logins, server.mails) == ([], [])  # the password never left

        sender("127.0.0.1").send(_run_alert())
        assert server.logins == ["alerts"]
        (mail,) = server.mails
        assert mail.message["Subject"] == "[crawl-platform] Run failed: crawl_batch_job (crawl shop-1)"


def test_no_channel_configured_sends_nothing_and_counts_as_done(store_settings):
    notifier = Notifier.from_settings(store_settings)
    assert not notifier.configured
    assert notifier.send(_run_alert()).ok


def test_smtp_login_uses_the_configured_user_and_password():
    with SMTPReceiver(login=("alerts", "s3cret")) as server:
        EmailSender(server.host, server.port, "crawler@test.local", ["ops@test.local"],
                    user="alerts", password="s3cret").send(_run_alert())
        assert server.logins == ["alerts"]
        assert len(server.mails) == 1
        wrong = EmailSender(server.host, server.port, "crawler@test.local", ["ops@test.local"],
                            user="alerts", password="wrong")
        with pytest.raises(Exception, match="SMTPAuthenticationError"):
            wrong.send(_run_alert())
        assert len(server.mails) == 1


def test_settings_hand_the_smtp_password_to_child_processes_but_never_show_it(store_settings, monkeypatch):
    monkeypatch.setenv("CRAWL_ALERT_SMTP_PASSWORD", "s3cret")
    from crawl_platform.config import Settings  # noqa: PLC0415

    settings = Settings()
    assert "s3cret" not in repr(settings)
    assert settings.to_env()["CRAWL_ALERT_SMTP_PASSWORD"] == "s3cret"


def test_check_alert_links_to_the_check_and_the_run():
    alert = check_failed(LINKS, run_id="r1", failures=[("pages", "pages_quality", "content_hash: 2 of 40 rows")],
                         crawls=["a", "b"], batches=["e0.p0-0-5", "e0.p1-0-9"])
    assert alert.text == """[crawl-platform] Quality check failed: pages_quality (2 crawls)
Crawls: a, b
What broke: pages_quality on pages: content_hash: 2 of 40 rows
Batches: e0.p0-0-5, e0.p1-0-9
Check pages_quality: http://ui.test:3000/assets/pages?view=checks&checkDetail=pages_quality
Run: http://ui.test:3000/runs/r1"""


def _status(crawl_id, pending, last_update, registered=datetime(2026, 1, 1, 12, 0)):
    return CrawlStatus(crawl_id, pending, 5, 1, 0, registered, last_update)


def test_a_stall_alerts_once_and_again_only_after_progress_resumed_and_stopped():
    start = datetime(2026, 1, 1, 12, 0)
    after = timedelta(minutes=15)
    ledger = StallLedger.decode(None)
    statuses = [_status("busy", 10, start), _status("done", 0, start), _status("fresh", 3, None, start)]
    alerted = []
    for minute in range(40):  # one tick a minute, no progress
        now = start + timedelta(minutes=minute)
        stalls = find_stalls(statuses, now, after)
        new = ledger.new(stalls)
        ledger.settle(stalls, new)
        ledger = StallLedger.decode(ledger.encode())  # through the cursor
        alerted += [(minute, s.crawl_id) for s in new]
    assert alerted == [(15, "busy"), (15, "fresh")]  # "done" has nothing pending
    # "busy" progresses at 12:40, then stalls again: a new stall, a new alert.
    statuses[0] = _status("busy", 9, start + timedelta(minutes=40))
    for minute in range(40, 70):
        now = start + timedelta(minutes=minute)
        stalls = find_stalls(statuses, now, after)
        new = ledger.new(stalls)
        ledger.settle(stalls, new)
        alerted += [(minute, s.crawl_id) for s in new]
    assert alerted[2:] == [(55, "busy")]
    alert = crawl_stalled(LINKS, crawl_id="busy", pending=9, idle_minutes=15.2,
                          last_progress=start + timedelta(minutes=40))
    assert alert.text.splitlines()[:3] == [
        "[crawl-platform] Crawl stalled: busy", "Crawl: busy",
        "What broke: 9 URLs pending and none finished for 15 minutes (last progress 2026-01-01 12:40:00 UTC)"]


def test_a_paused_or_cancelled_crawl_with_pending_urls_is_not_stalled():
    start = datetime(2026, 1, 1, 12, 0)
    statuses = [dataclasses.replace(_status(c, 4, start), state=c) for c in ("paused", "cancelled", "active")]
    assert [s.crawl_id for s in find_stalls(statuses, start + timedelta(hours=1), timedelta(minutes=15))] == ["active"]


def test_a_stall_whose_alert_was_not_delivered_is_tried_again():
    start = datetime(2026, 1, 1, 12, 0)
    stalls = find_stalls([_status("c", 2, start)], start + timedelta(minutes=20), timedelta(minutes=15))
    ledger = StallLedger()
    ledger.settle(stalls, sent=[])
    assert ledger.new(stalls) == stalls


def test_parked_alerts_round_trip_and_go_out_in_order_once_a_channel_is_back(store_settings, webhook):
    outbox = AlertOutbox.decode(None)
    first, second = _run_alert(), crawl_stalled(LINKS, crawl_id="c", pending=1, idle_minutes=20,
                                                last_progress=datetime(2026, 1, 1, 12, 0))
    outbox.park(first)
    outbox.park(second)
    outbox = AlertOutbox.decode(outbox.encode())
    assert outbox.alerts == [first, second]
    notifier = Notifier.from_settings(alert_settings(store_settings, webhook))
    webhook.status = 500
    assert outbox.flush(notifier) == (0, [f"webhook {webhook.url.removesuffix('/hooks/alerts')}/…: HTTP 500 'ok'"])
    assert len(webhook.posts) == 1  # stops at the first refusal
    webhook.status = 200
    assert outbox.flush(notifier) == (2, [])
    assert outbox.alerts == []
    assert webhook.texts()[1:] == [first.text, second.text]
