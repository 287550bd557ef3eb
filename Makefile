# Everything a fresh machine needs is done by these targets; `make demo` and `make test` set up first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAUNCHER_DIR := pipeline/launcher
LAUNCHER := $(LAUNCHER_DIR)/target/entitlements-kcl-launcher.jar
LAUNCHER_SOURCES := $(shell find $(LAUNCHER_DIR)/src -name '*.java' 2>/dev/null) $(LAUNCHER_DIR)/pom.xml
# The erasure twins' JavaScript reference (ajv, ajv-formats), pinned by its package-lock.json.
NODE_RUNNER := conformance/node
NODE_STAMP := $(NODE_RUNNER)/node_modules/.package-lock.json
# The Delta jars for pyspark (scripts/spark/pom.xml), local files the Spark test hands to spark.jars.
SPARK_JARS := $(VENV)/spark-jars
SPARK_STAMP := $(SPARK_JARS)/.copied

# pytest-xdist workers for `make test` and `make check`. Each test file runs whole on one worker (`--dist
# loadfile`): a module-scoped fixture (a moto process, a local stack, a running daemon) starts once, not once
# per worker. Files are handed out in the order tests/conftest.py gives (the daemon files first: the longest,
# mostly waiting on the JVM), so more workers than the 2 cores pay.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: setup demo test check lint bench debian-tools clean

setup: $(STAMP) $(LAUNCHER) $(NODE_STAMP) $(SPARK_STAMP) debian-tools

$(STAMP): pyproject.toml scripts/install.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) scripts/install.py --editable --extras dev
	touch $(STAMP)

$(LAUNCHER): $(LAUNCHER_SOURCES)
	mvn -q -B -f $(LAUNCHER_DIR)/pom.xml package -DskipTests

# Copied into a scratch folder, then moved in: an interrupted copy leaves no stamp and no half a folder.
$(SPARK_STAMP): scripts/spark/pom.xml | $(STAMP)
	rm -rf $(SPARK_JARS) $(SPARK_JARS).partial
	mvn -q -B -f scripts/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(abspath $(SPARK_JARS)).partial
	mv $(SPARK_JARS).partial $(SPARK_JARS)
	touch $(SPARK_STAMP)

$(NODE_STAMP): $(NODE_RUNNER)/package.json $(NODE_RUNNER)/package-lock.json
	npm ci --prefix $(NODE_RUNNER) --no-audit --no-fund
	touch $(NODE_STAMP)

# Debian's headless Chromium (HTML report test) and docker-compose (compose file check).
debian-tools:
	@bash scripts/install_debian_tools.sh

demo: setup
	$(VENV)/bin/entitlements demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Every test, the KCL daemon tests included.
test: lint
	$(VENV)/bin/pytest $(PYTEST_PARALLEL)

# Lint, types and every test that starts no daemon: the quick loop before a commit.
check: lint
	$(VENV)/bin/pytest $(PYTEST_PARALLEL) -m "not kcl"

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) .cache var $(LAUNCHER_DIR)/target $(NODE_RUNNER)/node_modules
