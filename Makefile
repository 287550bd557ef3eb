# Everything a fresh machine needs is done by these targets; `make demo` and `make test` set up first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAUNCHER_DIR := pipeline/launcher
LAUNCHER := $(LAUNCHER_DIR)/target/entitlements-kcl-launcher.jar
LAUNCHER_SOURCES := $(shell find $(LAUNCHER_DIR)/src -name '*.java' 2>/dev/null) $(LAUNCHER_DIR)/pom.xml

.PHONY: setup demo test bench debian-tools clean

setup: $(STAMP) $(LAUNCHER) debian-tools

# The install also compiles pipeline/_instances_c.pyx (Cython): edit it, and the next target rebuilds.
$(STAMP): pyproject.toml scripts/install_kclpy.py pipeline/_instances_c.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) scripts/install_kclpy.py
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(LAUNCHER): $(LAUNCHER_SOURCES)
	mvn -q -B -f $(LAUNCHER_DIR)/pom.xml package -DskipTests

# Debian's headless Chromium (HTML report test) and docker-compose (compose file check).
debian-tools:
	@bash scripts/install_debian_tools.sh

demo: setup
	$(VENV)/bin/entitlements demo

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) .cache var $(LAUNCHER_DIR)/target
