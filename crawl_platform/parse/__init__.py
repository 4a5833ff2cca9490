"""Parsing fetched pages: decoding the body (encoding) and extracting title, text and links (html)."""
