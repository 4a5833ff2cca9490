"""Near-duplicate detection over landed documents (near_duplicates), read from and written to the store."""
