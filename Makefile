# Two entry points for a fresh machine: `make run` (the platform, embedded default) and `make test` (every test).
# Both create .venv and install requirements.txt idempotently (a stamp file records the last successful install).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# All of `make run`'s state (Airflow home, metastore, warehouse, logs); `acid` run with the same ACID_HOME sees it.
ACID_HOME ?= $(CURDIR)/.acid-home
export ACID_HOME
# The UI / API port of `make run` is AIRFLOW__API__PORT (default 8080): `make run AIRFLOW__API__PORT=8091`.

.PHONY: run test bench install clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	# apache-airflow-providers-apache-spark pulls in pyspark-client 4.2, whose files overwrite pyspark 4.3's Python
	# modules (the jars stay 4.3): put pyspark's own Python back so Python and JVM sides match.
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall "$$(grep '^pyspark==' requirements.txt)"
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m acid_platform

# The browser tests (tests/ui, Playwright) drive Debian's chromium package; installed once, as root (CI) or with sudo.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	$$([ "$$(id -u)" = 0 ] || echo sudo) sh -c 'apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)'

# lint-imports checks the import contracts of pyproject.toml first (plugins/ on the path, as Airflow puts it there).
test: $(STAMP) $(CHROMIUM)
	PYTHONPATH="$(CURDIR)/plugins" $(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/bench_snapshot_read.py
	$(BIN)/python bench/bench_metastore.py
	$(BIN)/python bench/bench_compaction.py
	$(BIN)/python bench/bench_initiator.py
	$(BIN)/python bench/bench_history.py
	$(BIN)/python bench/bench_scale.py
	$(BIN)/python bench/bench_s3.py
	$(BIN)/python bench/bench_fleet.py
	$(BIN)/python bench/bench_fleet.py --steady

clean:
	rm -rf $(VENV) $(ACID_HOME)
