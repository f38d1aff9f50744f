"""What Dash's page loads before a graph can draw: its Babel polyfill (97 kB) left out when
the 25 kB part its scripts use is there; dcc.Graph's lazy chunk asked for up front.

Dash puts @babel/polyfill 7 in every page. In a current browser the only part its scripts use
is `regeneratorRuntime` (Dash's renderer, core components and table call it); the rest is
core-js re-checking and re-wrapping built-ins the browser already has, which cost about 250 ms
of a cold Shapes load on this machine. `make install` fetches regenerator-runtime next to
plotly.js (jsbundle/build.sh) and Dash serves it from the assets; only when it is there is the
polyfill's script tag dropped, so a machine without npm keeps Dash's page as it ships.

dcc.Graph loads its code (async-graph.js) only when a graph first renders, one more round trip
after the page's layout has arrived; a preload hint fetches it with the page's scripts.
"""

from __future__ import annotations

import re
from pathlib import Path

from dash import dcc

from app.dashboard.speedups.plotlyjs import STATIC

RUNTIME = STATIC / "vendor" / "regenerator-runtime.js"
GRAPH_CHUNK = "async-graph.js"
_POLYFILL_TAG = re.compile(r'<script src="[^"]*/polyfill@[^"]*"></script>\s*')


def runtime_served() -> bool:
    """Whether the runtime is among the assets (decided once, when Dash collects them)."""
    return RUNTIME.is_file()


def drop_polyfill(scripts: str) -> str:
    """The page's script tags without Dash's Babel polyfill."""
    return _POLYFILL_TAG.sub("", scripts)


def preload_graph(prefix: str) -> str:
    """A preload link for dcc.Graph's chunk, or nothing if this Dash does not ship one."""
    if not (Path(dcc.__file__).parent / GRAPH_CHUNK).is_file():
        return ""
    href = f"{prefix}_dash-component-suites/dash/dcc/{GRAPH_CHUNK}"
    return f'<link rel="preload" as="script" href="{href}">'
