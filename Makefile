# tokenshape: `make demo` shows the product with data, `make test` runs the whole suite.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
PORT ?= 8050

# uv installs the environment pinned in uv.lock. It is bootstrapped with the machine's pip into
# a folder of its own (pip's --target needs no venv module and sidesteps Debian's
# externally-managed system Python), so a fresh machine needs only python3 and pip. Keep the
# version equal to the Dockerfile's UV_VERSION (tests/test_deploy_files.py checks).
UV_VERSION := 0.13.9
TOOLS := .tools
UV_STAMP := $(TOOLS)/uv-$(UV_VERSION).stamp
# uv uses $(PYTHON), never a Python it would download, and installs into $(VENV).
UV := UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=$(VENV) $(TOOLS)/bin/uv
# What `make install` puts in the venv: the server, the test tools (with the tokenizer extra,
# whose tests run too) and the docs builder; pyproject.toml says what each extra holds.
EXTRAS := --extra test --extra docs

PY_DIRS := app ingest tests bench
# Without the end-of-life banner Material for MkDocs prints on every build.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

.PHONY: install lock demo run test lint docs bench chromium java aiperf axe clean

$(UV_STAMP):
	rm -rf $(TOOLS)
	$(PYTHON) -m pip install -q --disable-pip-version-check --target $(TOOLS) uv==$(UV_VERSION)
	touch $@

# --locked: the venv is exactly uv.lock, and a uv.lock that no longer matches pyproject.toml
# is an error (run `make lock`), never silently re-resolved. The project itself is installed
# editable (uv's default): app/storage/migrate.py finds migrations/ beside the source tree.
# --compile-bytecode (pip's default, not uv's): with PYTHONDONTWRITEBYTECODE set, as on these
# machines, every process would otherwise compile every import from source; measured, the
# suite took 300 s instead of 201 s, its many server and CLI subprocesses paying each time.
$(BIN)/tokenshape: pyproject.toml uv.lock $(UV_STAMP)
	$(UV) sync --locked --compile-bytecode --python $(PYTHON) $(EXTRAS)
	touch $@

# After changing dependencies in pyproject.toml: re-resolve uv.lock (commit it), then install.
lock: $(UV_STAMP)
	$(UV) lock --python $(PYTHON)

# The plotly.js the dashboard draws with (scatter, bar, heatmap), built by jsbundle/build.sh from
# the npm registry at the plotly package's plotly.js version; without npm the dashboard uses
# plotly.js's full bundle (a slower first load). Rebuilt when uv.lock (which pins plotly) or the
# bundle's sources change; the venv need only exist.
PARTIAL_PLOTLY := static/vendor/plotly-dashboard.min.js
$(PARTIAL_PLOTLY): uv.lock jsbundle/entry.js jsbundle/build.sh | $(BIN)/tokenshape
	@rm -f static/vendor/plotly-cartesian.min.js
	@if command -v npm >/dev/null 2>&1; then \
	  v=$$($(BIN)/python -c "from plotly.offline import get_plotlyjs_version as v; print(v())"); \
	  sh jsbundle/build.sh $$v static/vendor || echo "building plotly.js failed: the dashboard uses the full bundle"; \
	else echo "npm not found: the dashboard uses plotly.js's full bundle (slower first load)"; fi

# The project's own modules compiled too, for the same reason (a changed file is recompiled in
# memory when imported, so a stale .pyc is never used).
install: $(BIN)/tokenshape $(PARTIAL_PLOTLY)
	@$(BIN)/python -m compileall -q app ingest

# Fresh demo data each time (the demo's timestamps end at the current hour).
demo: install
	rm -rf data/demo.duckdb data/demo.duckdb.wal data/demo.duckdb.journal data/demo.duckdb.quarantine
	$(BIN)/tokenshape demo --db data/demo.duckdb --serve --host 127.0.0.1 --port $(PORT)

run: install
	$(BIN)/tokenshape serve --db data/tokenshape.duckdb --port $(PORT)

# Browser tests drive Debian's Chromium; install it when missing (needs root, as in CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The Spark tests (tokenshape[lake], tests/integration/test_lake_spark.py) need a Java 17+
# runtime; install Debian's when there is no java at all (needs root, as in CI).
java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "installing Debian's Java 17 runtime for the Spark tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }

# NVIDIA AIPerf for tests/integration/test_aiperf_replay.py, in a venv of its own: its pins
# conflict with the project's, so it has its own lock (tests/aiperf/uv.lock) and is only ever run
# as a command. Under $(TOOLS), so a new uv (which clears $(TOOLS)) reinstalls it too.
AIPERF_VENV := $(TOOLS)/aiperf
$(AIPERF_VENV)/bin/aiperf: tests/aiperf/pyproject.toml tests/aiperf/uv.lock $(UV_STAMP)
	UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=$(abspath $(AIPERF_VENV)) \
	  $(TOOLS)/bin/uv sync --locked --compile-bytecode --project tests/aiperf --python $(PYTHON)
	touch $@

aiperf: $(AIPERF_VENV)/bin/aiperf

# axe-core, the accessibility rules tests/browser/test_accessibility.py runs in each page, from
# the npm registry at a pinned version (a new pin reinstalls it); only its axe.min.js is used.
# Under $(TOOLS) and after uv's stamp, as AIPerf is: a new uv clears $(TOOLS), then this reinstalls.
AXE_VERSION := 4.14.1
AXE_DIR := $(TOOLS)/axe
AXE_STAMP := $(AXE_DIR)/axe-core-$(AXE_VERSION).stamp
$(AXE_STAMP): $(UV_STAMP)
	rm -rf $(AXE_DIR)
	npm install --prefix $(AXE_DIR) --loglevel=error --no-audit --no-fund --no-save \
	  axe-core@$(AXE_VERSION) >/dev/null
	touch $@

axe: $(AXE_STAMP)

# The static checks: lint, formatting, the import contracts ([tool.importlinter]), types.
lint: install
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/lint-imports
	$(BIN)/mypy app ingest

# The static checks, the docs built strictly (into a folder thrown away), then the suite.
test: lint chromium java aiperf axe
	d=$$(mktemp -d) && $(MKDOCS) build --strict --quiet -d "$$d"; rc=$$?; rm -rf "$$d"; exit $$rc
	$(BIN)/pytest -q

# The documentation site (mkdocs.yml, docs/) into site/.
docs: install
	$(MKDOCS) build -d site

bench: install chromium
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/query.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/retention.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/soak.py
	$(BIN)/python bench/bodies.py
	$(BIN)/python bench/perf.py
	$(BIN)/python bench/plan.py
	$(BIN)/python bench/export.py

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache site
