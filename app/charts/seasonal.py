"""The Seasonal page's per-window heat maps on one colour scale, so a colour means the same share
of requests in every window."""

from __future__ import annotations

import copy
from collections.abc import Sequence

SHARE_UNIT = "% of the window's requests"
COLORBAR_ROOM = 120  # px right of each map: the colour bar's width with its title


def _heat(fig: dict) -> dict:
    return next(t for t in fig["data"] if t.get("type") == "heatmap")


def _peak(values: list[list[float | None]]) -> float:
    return max((v for row in values for v in row if v is not None), default=0.0)


def shared_heat_scale(figures: Sequence[dict]) -> tuple[list[dict], float]:
    """Copies of heat maps (app/charts/heatmap, in percent) with one colour range, 0 to the
    largest cell share of any, and one colour bar (on the last); their marginal histograms share
    their ranges too. Returns the figures and that largest share."""
    out = [copy.deepcopy(f) for f in figures]
    if not out:
        return out, 0.0
    top = max(_peak(_heat(f)["z"]) for f in out) or 1.0
    isl = max((max(t["y"], default=0) for f in out for t in f["data"] if _bars(t, "v")), default=0)
    osl = max((max(t["x"], default=0) for f in out for t in f["data"] if _bars(t, "h")), default=0)
    for i, f in enumerate(out):
        heat = _heat(f)
        heat.update({"zmin": 0.0, "zmax": top, "zauto": False})
        heat["showscale"] = i == len(out) - 1
        heat["colorbar"] = {
            **heat.get("colorbar", {}),
            "title": {"text": SHARE_UNIT, "side": "right"},
        }
        # Every map keeps room for the one colour bar, so the maps are the same size.
        f["layout"]["margin"] = {**f["layout"].get("margin", {}), "r": COLORBAR_ROOM}
        # The maps' margins on one range as well: a bar's length means the same share.
        if isl:
            f["layout"]["yaxis"]["range"] = [0, isl * 1.05]
        if osl:
            f["layout"]["xaxis4"]["range"] = [0, osl * 1.05]
    return out, top


def _bars(trace: dict, orientation: str) -> bool:
    return trace.get("type") == "bar" and trace.get("orientation") == orientation
