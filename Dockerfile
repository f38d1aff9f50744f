# tokenshape: one process serving ingest, API and dashboard over one DuckDB file in /data.
#   docker build -t tokenshape .
#   docker run -d -p 8050:8050 -v tokenshape-data:/data tokenshape
# The image installs exactly uv.lock. `--build-arg EXTRAS=tokenizer` adds that extra
# (`tokenshape import --tokenizer`, about 28 MB more).

# Both Python stages start from the same image: the venv built in one runs in the other.
ARG PYTHON_IMAGE=python:3.11-slim
# Keep equal to the Makefile's UV_VERSION (tests/test_deploy_files.py checks).
ARG UV_VERSION=0.13.9

# --- build: the locked environment, and the plotly.js version it carries ----------------------
FROM ${PYTHON_IMAGE} AS build
ARG UV_VERSION
ARG EXTRAS=
ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3 \
    UV_PROJECT_ENVIRONMENT=/srv/tokenshape/.venv \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1
# uv from PyPI with pip, as the Makefile bootstraps it (no other registry involved).
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /srv/tokenshape
# The dependencies first, in a layer of their own that a change to the source does not redo.
COPY pyproject.toml uv.lock README.md /srv/tokenshape/
RUN uv sync --locked --compile-bytecode --no-dev --no-install-project ${EXTRAS:+--extra "$EXTRAS"}
# Then the project itself, editable on purpose: app/storage/migrate.py finds the Alembic
# `migrations/` folder relative to the source tree, which a regular (wheel) install would leave
# behind. So the source stays at /srv/tokenshape, in the final image too, and the venv's .pth
# points there.
COPY . /srv/tokenshape
RUN uv sync --locked --compile-bytecode --no-dev ${EXTRAS:+--extra "$EXTRAS"} \
    && /srv/tokenshape/.venv/bin/python -c "import app, pathlib; assert pathlib.Path(app.__file__).is_relative_to('/srv/tokenshape'), app.__file__" \
    && /srv/tokenshape/.venv/bin/python -c "from plotly.offline import get_plotlyjs_version as v; print(v())" > /plotly-js-version \
    && echo "plotly.js $(cat /plotly-js-version) (the locked plotly's)"

# --- plotly: the dashboard's own plotly.js bundle (scatter, bar, heatmap; jsbundle/build.sh) ---
# From the npm registry, at the version the locked plotly package carries, so the app accepts it
# (app/dashboard/speedups/plotlyjs.py) instead of falling back to the 4.8 MB full bundle. Any
# failure here fails the image build.
FROM node:20-slim AS plotly
WORKDIR /build
COPY --from=build /plotly-js-version /build/plotly-js-version
COPY jsbundle /build/jsbundle
RUN sh jsbundle/build.sh "$(cat /build/plotly-js-version)" /build/out

# --- the image ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/srv/tokenshape/.venv/bin:$PATH

WORKDIR /srv/tokenshape
COPY --from=build /srv/tokenshape /srv/tokenshape
COPY --from=plotly /build/out/ /srv/tokenshape/static/vendor/
# Loudly, not a silent fallback: the app must take the bundle and the polyfill's runtime.
RUN python -c "from app.dashboard.speedups import plotlyjs, polyfill; assert plotlyjs.partial_plotly_usable(), 'static/vendor/plotly-dashboard.min.js is not the locked plotly.js'; assert polyfill.runtime_served(), 'static/vendor/regenerator-runtime.js is missing'"

# Non-root user. /data is created and owned by it before VOLUME, so a fresh named volume
# inherits that ownership and the server can create the database file there.
RUN useradd --system --uid 10001 --user-group --home-dir /nonexistent --no-create-home tokenshape \
    && mkdir -p /data \
    && chown tokenshape:tokenshape /data
USER tokenshape

VOLUME /data

ENV TOKENSHAPE_DB=/data/tokenshape.duckdb \
    TOKENSHAPE_HOST=0.0.0.0 \
    TOKENSHAPE_PORT=8050

EXPOSE 8050

# No curl in the slim image: python's urllib. A 503 (database or writer down) raises, exit 1.
# start-period covers migrations and loading the dedupe index of a large database.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8050/api/health', timeout=4)"]

CMD ["tokenshape", "serve"]
