"""Dagster resources: facades that build engine objects from settings, and the step handoff IO manager."""
