"""What one host reads of the lake and the archive, as one JSON line, for the multi-machine test.

``python -m tests.cluster.probe landed CRAWL_ID``: the crawl's page URLs as stored (duplicates
kept), and how many of its frontier URLs are still pending. ``python -m tests.cluster.probe
archive CRAWL_ID``: every stored response of the crawl read back from the archive on this host
(URL, status, content type and body length of each). Run in a host with that host's environment, it reads
what that host reaches.
"""

from __future__ import annotations

import json
import sys

from crawl_platform.archive.reader import archived_responses
from crawl_platform.config import Settings
from crawl_platform.store.database import CrawlStore


def main() -> None:
    what, crawl_id = sys.argv[1], sys.argv[2]
    store = CrawlStore.from_settings(Settings())
    if what == "landed":
        urls = [r[0] for r in store.query("SELECT url FROM pages WHERE crawl_id = ?", [crawl_id])]
        pending = store.query("SELECT count(*) FROM frontier WHERE crawl_id = ? AND state IN ('discovered', 'queued')",
                              [crawl_id])[0][0]
        print(json.dumps({"urls": urls, "pending": pending}))
    elif what == "archive":
        stored = archived_responses(store, crawl_id, latest_only=False)
        records = [(r.url, r.status, r.content_type or "", len(r.body)) for r in stored]
        print(json.dumps({"records": records}))
    else:
        raise SystemExit(f"unknown probe {what}")


if __name__ == "__main__":
    main()
