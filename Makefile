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

.PHONY: run test test-fast bench install clean

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

# The browser tests (tests/plugins, Playwright) drive Debian's chromium package; installed once, as root (CI) or with sudo.
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	$$([ "$$(id -u)" = 0 ] || echo sudo) sh -c 'apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)'

# The suite runs on one pytest-xdist worker per core (each worker has its own PostgreSQL server, Spark session and
# Airflow home); `make test PYTEST_WORKERS=0` runs it in one process. Work stealing keeps both cores busy to the end.
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist worksteal

# lint-imports checks the import contracts of pyproject.toml first (plugins/ on the path, as Airflow puts it there),
# then mypy the types of acid_core and acid_deploy ([tool.mypy]).
test: $(STAMP) $(CHROMIUM)
	PYTHONPATH="$(CURDIR)/plugins" $(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)

# The edit-test loop: every test that starts no JVM, no Airflow and no PostgreSQL (the SQLite half of the tests that
# run on both) and is not marked slow. CI runs `make test`, which runs them all. All short: plain load scheduling.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load -m "not (spark or airflow or interop or browser or slow or postgres)"

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
