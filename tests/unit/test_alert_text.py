"""An alert about a crawl whose id or error text holds line breaks still goes out, its subject one line."""

from crawl_platform.alerting.alerts import UILinks, run_failed
from crawl_platform.alerting.senders import Notifier
from tests.conftest import alert_settings


def test_a_title_with_line_breaks_is_mailed_with_a_one_line_subject(store_settings, webhook, smtp_server):
    alert = run_failed(UILinks("http://ui.test:3000/"), job="crawl_batch_job", run_id="8f14e45f",
                       crawls=["evil\r\nBcc: victim@test.local"], error="boom\nsecond line", partition="e0.p3-0-2")
    delivery = Notifier.from_settings(alert_settings(store_settings, webhook, smtp_server)).send(alert)
    assert delivery.errors == []
    assert delivery.delivered == ["webhook", "email"]
    (mail,) = smtp_server.mails
    unfolded = " ".join(mail.message["Subject"].split())  # a long header is folded on the wire
    assert unfolded == "[crawl-platform] Run failed: crawl_batch_job (crawl evil Bcc: victim@test.local)"
    assert mail.message["Bcc"] is None
    assert mail.recipients == ["ops@test.local", "oncall@test.local"]
