# The two commands of the README. Both create .venv on first use (pip upgraded first: the
# machine's old pip backtracks for minutes on this dependency set).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=26"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)  ## set up, then run the embedded stack and crawl the demo site
	$(BIN)/crawl-platform up

test: $(STAMP)  ## set up, then run the whole test suite (and the linters)
	$(BIN)/ruff check .
	$(BIN)/mypy crawl_platform
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy crawl_platform assets sensors resources definitions.py

clean:
	rm -rf $(VENV) data
