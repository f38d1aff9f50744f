"""Bin edges for token counts: readable log-spaced, half-octave, or linear (DESIGN §6)."""

from __future__ import annotations

from app.storage.rollups import HALF_OCTAVE_EDGES

LOG2_EDGES: tuple[int, ...] = (0,) + tuple(16 * 2**k for k in range(14))  # 0, 16 … 131072
SCHEMES = ("log2", "log2half", "linear")
MAX_LINEAR_BINS = 512


def half_octave_edges() -> tuple[int, ...]:
    """0, 16, 24, 32, 48, 64, 96 … : a readable step between every power of two (the bins the
    hourly rollups keep)."""
    return HALF_OCTAVE_EDGES


def edges_for(scheme: str, width: int | None = None, top: int = 0) -> tuple[int, ...]:
    """Lower bin edges; bins are [edge_i, edge_i+1) and the last one is open-ended."""
    if scheme == "log2":
        return LOG2_EDGES
    if scheme == "log2half":
        return half_octave_edges()
    if scheme == "linear":
        if not width or width < 1:
            raise ValueError("linear bins need a positive width")
        count = min(max(top // width + 1, 1), MAX_LINEAR_BINS)
        return tuple(i * width for i in range(count))
    raise ValueError(f"unknown bin scheme {scheme!r}: choose one of {', '.join(SCHEMES)}")


def case_sql(column: str, edges: tuple[int, ...]) -> tuple[str, list[int]]:
    """A CASE expression giving the bin index of `column`, with the edges as parameters."""
    if len(edges) < 2:  # one bin (an empty window, a width above every value): no WHEN at all
        return "(0)", []
    whens = " ".join(f"WHEN {column} < ? THEN {i}" for i in range(len(edges) - 1))
    return f"(CASE {whens} ELSE {len(edges) - 1} END)", list(edges[1:])
