"""Data quality: the Great Expectations suites over the lake's tables (suites), reading through the store."""
