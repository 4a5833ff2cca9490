"""Extraction rules: a crawl's declarative schema applied to its archived pages, landing typed records."""
