#!/bin/sh
# Build static/vendor/plotly-dashboard.min.js: plotly.js VERSION's core + bar + heatmap,
# bundled with esbuild from the npm registry; and static/vendor/regenerator-runtime.js, the one
# part of Dash's Babel polyfill its scripts need in a current browser
# (app/dashboard/speedups/polyfill.py).
# Usage: jsbundle/build.sh VERSION OUT_DIR. Any failure exits non-zero, with npm's error shown
# (the Docker build relies on that; `make install` falls back to the full bundle instead).
set -eu
version=${1:?usage: jsbundle/build.sh VERSION OUT_DIR}
out=$(mkdir -p "${2:?usage: jsbundle/build.sh VERSION OUT_DIR}" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/entry.js" "$work/"
cd "$work"
npm init -y >/dev/null
npm install --loglevel=error --no-audit --no-fund "plotly.js@$version" esbuild@0.25 \
  regenerator-runtime@0.14.1 >/dev/null
# The maplibre stylesheet core pulls in is for map traces, which are not in this bundle.
npx --no-install esbuild entry.js --bundle --minify --format=iife --global-name=Plotly \
  --define:global=window --define:define.amd=false --target=es2016 --loader:.css=empty \
  --log-level=error --outfile=bundle.js

{
  printf '/**\n* plotly.js (tokenshape dashboard: scatter, bar, heatmap) v%s\n' "$version"
  printf '* Copyright 2012-2026, Plotly, Inc. All rights reserved.\n'
  printf '* Licensed under the MIT license (plotly-LICENSE)\n*/\n'
  cat bundle.js
} > "$out/plotly-dashboard.min.js.partial"
cp node_modules/plotly.js/LICENSE "$out/plotly-LICENSE"
mv "$out/plotly-dashboard.min.js.partial" "$out/plotly-dashboard.min.js"
# The runtime carries its MIT notice at its head; its LICENSE goes beside it.
cp node_modules/regenerator-runtime/runtime.js "$out/regenerator-runtime.js.partial"
cp node_modules/regenerator-runtime/LICENSE "$out/regenerator-runtime-LICENSE"
mv "$out/regenerator-runtime.js.partial" "$out/regenerator-runtime.js"
