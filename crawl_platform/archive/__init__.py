"""The raw archive: every fetched response kept as gzip WARC records, and read back without the network."""
