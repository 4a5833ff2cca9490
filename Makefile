# The two commands of the README. Both create .venv on first use (pip upgraded first: the
# machine's old pip backtracks for minutes on this dependency set).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench bench-scale clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=26"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)  ## set up, then run the embedded stack and crawl the demo site
	$(BIN)/crawl-platform up

# `make test` runs three pytest passes on pytest-xdist workers.
# --dist loadfile: a module goes to one worker whole, because the e2e modules share one platform
# between their tests. Not --dist loadgroup: with pytest 9.2 it silently stops grouping
# (pytest-xdist #1386).
# The e2e modules go longest first (tests/e2e/conftest.py sorts them by their `e2e` mark's
# seconds), so that no slow module starts last and the pass lasts about as long as its longest
# module. Workers take modules in collection order only with --no-loadscope-reorder; by default
# pytest-xdist orders them by their number of tests.
# The worker counts suit the 2-core CI machine. TEST_WORKERS: the unit and Dagster tests are
# CPU-bound, so one worker per core. E2E_WORKERS: the e2e tests mostly wait (sensor ticks, retries,
# fault timeouts; each run is forked from a warm process), so one worker more than the cores keeps
# them busy; more than that saturates the cores and tests start to run into their timeouts.
# Tests marked `timing` measure wall-clock gaps with little slack: they run alone, last, with no
# other pass competing for the cores.
TEST_WORKERS ?= 2
E2E_WORKERS ?= 3

test: $(STAMP)  ## set up, then run the whole test suite (and the linters)
	$(BIN)/ruff check .
	$(BIN)/mypy crawl_platform crawl_platform_dagster
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not timing" -n $(TEST_WORKERS) --dist loadfile \
		--durations=10 tests/unit tests/dagster
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not timing" -n $(E2E_WORKERS) --dist loadfile \
		--no-loadscope-reorder \
		--durations=10 tests/e2e
	$(BIN)/python -m pytest -q -p no:cacheprovider -m timing --durations=5 tests/unit tests/e2e

PAGES ?= 20000
BENCH_ARGS ?= --mode dagster --scrapy-concurrency 1
HOSTS ?= 500
HOST_PAGES ?= 40

# Both comparisons of docs/benchmarks.md: the one-host site (PAGES articles, no delay), then the
# polite broad crawl (HOSTS hostnames x HOST_PAGES articles, the default 250 ms per host).
bench: $(STAMP)  ## the platform against Scrapy and Crawlee on generated nginx-served sites (docs/benchmarks.md)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || \
		(apt-get install -y -q nginx-light && (service nginx stop || true))
	$(BIN)/python benchmarks/compare.py --pages $(PAGES) $(BENCH_ARGS)
	$(BIN)/python benchmarks/compare.py --hosts $(HOSTS) --pages-per-host $(HOST_PAGES) --host-delay-ms 250 \
		$(BENCH_ARGS)

# The sizes of docs/scale.md, the platform alone: a million pages on one host with no delay, then
# 10,000 hostnames x 50 pages at the default politeness. Each runs for most of an hour or more.
bench-scale: $(STAMP)  ## the million-page site and the 10,000-host polite crawl, the platform alone
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	command -v nginx >/dev/null || test -x /usr/sbin/nginx || \
		(apt-get install -y -q nginx-light && (service nginx stop || true))
	$(BIN)/python benchmarks/compare.py --pages 1000000 --mode dagster --scrapy-concurrency --crawlee-concurrency \
		--platform-timeout 7200
	$(BIN)/python benchmarks/compare.py --hosts 10000 --pages-per-host 50 --host-delay-ms 250 --mode dagster \
		--scrapy-concurrency --crawlee-concurrency --platform-timeout 7200

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy crawl_platform crawl_platform_dagster

clean:
	rm -rf $(VENV) data
