"""Stored pages as Markdown (documents), landed in ``documents_markdown`` through the store."""
