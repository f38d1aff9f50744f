# tokenshape: one process serving ingest, API and dashboard over one DuckDB file in /data.
#   docker build -t tokenshape .
#   docker run -d -p 8050:8050 -v tokenshape-data:/data tokenshape

# The dashboard's own plotly.js bundle (scatter, bar, heatmap; jsbundle/build.sh) from the npm
# registry: a quarter of the full bundle, for a fast first page load. Keep the version equal to
# the plotly package's plotly.js (the app checks and falls back to the full bundle otherwise).
FROM node:20-slim AS plotly
ARG PLOTLY_JS_VERSION=4.1.1
WORKDIR /build
COPY jsbundle /build/jsbundle
RUN sh jsbundle/build.sh ${PLOTLY_JS_VERSION} /build/out

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/tokenshape
COPY . /srv/tokenshape

# Editable on purpose: app/storage/migrate.py finds the Alembic `migrations/` folder relative
# to the source tree, which a regular (wheel) install would leave behind.
RUN pip install --no-cache-dir -e .
COPY --from=plotly /build/out/ /srv/tokenshape/static/vendor/

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
