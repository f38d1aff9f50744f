# tokenshape: `make demo` shows the product with data, `make test` runs the whole suite.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
PORT ?= 8050

.PHONY: install demo run test lint bench chromium clean

$(BIN)/tokenshape: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $@

# The plotly.js the dashboard draws with (scatter, bar, heatmap), built by jsbundle/build.sh from
# the npm registry at the plotly package's plotly.js version; without npm the dashboard uses
# plotly.js's full bundle (a slower first load).
PARTIAL_PLOTLY := static/vendor/plotly-dashboard.min.js
$(PARTIAL_PLOTLY): $(BIN)/tokenshape jsbundle/entry.js jsbundle/build.sh
	@rm -f static/vendor/plotly-cartesian.min.js
	@if command -v npm >/dev/null 2>&1; then \
	  v=$$($(BIN)/python -c "from plotly.offline import get_plotlyjs_version as v; print(v())"); \
	  sh jsbundle/build.sh $$v static/vendor || echo "building plotly.js failed: the dashboard uses the full bundle"; \
	else echo "npm not found: the dashboard uses plotly.js's full bundle (slower first load)"; fi

install: $(BIN)/tokenshape $(PARTIAL_PLOTLY)

# Fresh demo data each time (the demo's timestamps end at the current hour).
demo: install
	rm -f data/demo.duckdb data/demo.duckdb.wal
	$(BIN)/tokenshape demo --db data/demo.duckdb --serve --host 127.0.0.1 --port $(PORT)

run: install
	$(BIN)/tokenshape serve --db data/tokenshape.duckdb --port $(PORT)

# Browser tests drive Debian's Chromium; install it when missing (needs root, as in CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test: install chromium
	$(BIN)/ruff check app ingest tests bench
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check app ingest tests bench
	$(BIN)/ruff format --check app ingest tests bench

bench: install chromium
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/query.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/retention.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
