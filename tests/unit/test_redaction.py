"""What is shown of an address that holds a secret: passwords in URLs and libpq connection strings
become ``***``, a webhook URL keeps its scheme and host, and the settings never show their secrets."""

from crawl_platform.config import Settings
from crawl_platform.redaction import passwords, redact_passwords, redact_url_path, scrub, url_secrets


def test_passwords_in_urls_and_connection_strings_are_masked_wherever_they_occur():
    text = ("broker pyamqp://crawler:b-r0ker@rabbit:5672// and postgres:dbname=crawl host=pg user=crawler "
            "password=p4ss sslmode=require and password='two words' and sslpassword=k3y and "
            "postgresql://crawler:p4ss@pg/crawl?sslmode=require&password=q-pw and \"password=echoed\": done")
    assert redact_passwords(text) == (
        "broker pyamqp://crawler:***@rabbit:5672// and postgres:dbname=crawl host=pg user=crawler "
        "password=*** sslmode=require and password=*** and sslpassword=*** and "
        "postgresql://crawler:***@pg/crawl?sslmode=require&password=*** and \"password=***\": done")
    untouched = "dbname=crawl host=pg user=crawler, http://h3/ or user@example.com, a passwords table"
    assert redact_passwords(untouched) == untouched


def test_the_passwords_of_a_connection_string_are_found_as_written_and_as_meant():
    assert passwords("postgres:dbname=crawl password='a b'") == ["'a b'", "a b"]
    assert passwords("postgres:dbname=crawl password='it\\'s'") == ["'it\\'s'", "it's"]
    assert passwords("postgresql://c:p%40ss@pg/crawl?password=q") == ["p%40ss", "p@ss", "q"]
    assert passwords("postgres:dbname=crawl host=pg user=crawler") == []


def test_scrub_takes_every_secret_out_of_an_error_even_reworded():
    secrets = passwords("postgres:dbname=crawl password='pass word'")
    error = "near 'pass word': syntax error; unquoted, pass word; connecting to postgresql://c:pw@pg"
    assert scrub(error, secrets) == "near ***: syntax error; unquoted, ***; connecting to postgresql://c:***@pg"


def test_a_webhook_url_is_shown_as_its_scheme_and_host():
    assert redact_url_path("https://hooks.slack.com/services/T0/B0/s3cret") == "https://hooks.slack.com/…"
    assert redact_url_path("http://u:pw@127.0.0.1:8080/hook?token=s3cret") == "http://127.0.0.1:8080/…"
    assert redact_url_path("https://chat.example/") == "https://chat.example"
    assert redact_url_path("not a url") == "***"
    assert url_secrets("https://h/services/T0/s3cret?x=1") == [
        "https://h/services/T0/s3cret?x=1", "/services/T0/s3cret?x=1", "/services/T0/s3cret", "x=1"]


def test_settings_never_show_a_secret_in_their_repr(monkeypatch):
    secrets = {
        "CRAWL_CELERY_BROKER": "pyamqp://crawler:b-r0ker@rabbit:5672//",
        "CRAWL_CELERY_BACKEND": "redis://:r3sult@redis:6379/1",
        "CRAWL_LAKE_CATALOG": "postgres:dbname=crawl host=pg user=crawler password=p4ss",
        "CRAWL_ALERT_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/s3cret",
        "CRAWL_ALERT_SMTP_PASSWORD": "sm7p",
        "KAFKA_CLIENT_CONFIG": '{"sasl.password": "k4fka"}',
        "CRAWL_PROXIES": '["http://crawler:pr0xy@proxy:3128"]',
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    shown = repr(settings) + str(settings)
    for word in ("b-r0ker", "r3sult", "p4ss", "s3cret", "sm7p", "k4fka", "pr0xy"):
        assert word not in shown
    assert {name: settings.to_env()[name] for name in secrets} == secrets  # child processes get them all
