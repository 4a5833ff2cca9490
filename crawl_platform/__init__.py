"""crawl-platform's engine: everything that crawls, with no Dagster import (docs/architecture.md)."""

import logging

# A library stays quiet unless the application configures logging (the CLI, Dagster do).
logging.getLogger("crawl_platform").addHandler(logging.NullHandler())
