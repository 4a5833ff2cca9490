"""Dagster sensors and schedules: Kafka topics and landed batches turned into runs."""
