"""Parsing fetched pages: decoding the body (encoding) and extracting title, text and links (html)."""

MAX_LINKS_PER_PAGE = 6000
"""Links a page keeps by default (``CRAWL_MAX_LINKS_PER_PAGE``): what Heritrix keeps; the pages of the
Python docs have a tenth of it. Here, where the settings and the parse workers can both read it
without importing anything."""
