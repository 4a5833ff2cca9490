"""Parsing fetched pages: decoding the body (encoding) and extracting title, text and links (html)."""

MAX_LINKS_PER_PAGE = 6000
"""Links a page keeps by default (``CRAWL_MAX_LINKS_PER_PAGE``): what Heritrix keeps, far above what
any page of the Python docs links to. Here, where the settings and the parse workers can both read
it without importing anything."""
