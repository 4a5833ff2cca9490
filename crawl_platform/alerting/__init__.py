"""Alerts when something breaks: what they say (``alerts``), where they go (``senders``), which
crawls a failure concerned (``affected``) and when a crawl counts as stalled (``stalls``).

Engine code, no Dagster: the alert sensors in ``sensors/alerts.py`` feed it what Dagster saw
(a failed run, a failed check evaluation) and the lake's per-crawl progress, and keep its
deduplication state in their cursors.
"""
