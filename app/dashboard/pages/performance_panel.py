"""The Rightsizing page's "Latency at the observed load" panel: the performance model's figures
for an engine's own traffic, as the library gives them and calibrated to what it did."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dash import html

from app.dashboard import ids
from app.services.perfmodel import PerfModelError
from app.services.performance import engine_performance
from app.sizing.profile import EngineProfile
from app.storage.database import Database


def _ms(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f} ms"


def _rate(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def panel(
    db: Database, engine: str, profile: EngineProfile, start: datetime, end: datetime
) -> html.Div:
    """The model's latency and throughput at the engine's mix and peak load, and by level."""
    try:
        out = engine_performance(db, engine, profile, start=start, end=end)
    except (PerfModelError, LookupError, ValueError) as exc:
        return html.Div(
            [
                html.H3("Latency at the observed load"),
                html.P(f"No prediction: {exc}", className="notes"),
            ],
            className="card",
            id=ids.RIGHTSIZING_PERFORMANCE,
        )
    raw, cal, corr = out["model"], out["calibrated"], out["corrections"]
    rows: list[tuple[str, str, str]] = [
        ("TTFT, mean", _ms(raw["ttft_ms"]), _ms(cal["ttft_ms"])),
        (
            "TTFT, p90 over request shapes",
            _ms(raw["ttft_shapes_p90_ms"]),
            _ms(cal["ttft_shapes_p90_ms"]),
        ),
        ("ITL (time per output token)", _ms(raw["itl_ms"], 2), _ms(cal["itl_ms"], 2)),
        (
            "output tokens/s per replica",
            _rate(raw["output_tokens_per_s"]),
            _rate(cal["output_tokens_per_s"]),
        ),
        (
            "requests/s per replica",
            _rate(raw["requests_per_s"], 2),
            _rate(cal["requests_per_s"], 2),
        ),
    ]
    table = html.Table(
        [
            html.Thead(html.Tr([html.Th(""), html.Th("model"), html.Th("calibrated")])),
            html.Tbody([html.Tr([html.Td(a), html.Td(b), html.Td(c)]) for a, b, c in rows]),
        ],
        className="table",
    )
    levels = out["by_inflight"]
    level_table: list[Any] = []
    if levels:
        level_table = [
            html.H4("By requests in flight at arrival: observed medians vs the model"),
            html.Table(
                [
                    html.Thead(
                        html.Tr(
                            [
                                html.Th("in flight"),
                                html.Th("requests"),
                                html.Th("ITL observed"),
                                html.Th("model"),
                                html.Th("calibrated"),
                                html.Th("TTFT observed"),
                                html.Th("model"),
                                html.Th("calibrated"),
                            ]
                        )
                    ),
                    html.Tbody(
                        [
                            html.Tr(
                                [
                                    html.Td(f"{lv['inflight']:.1f}"),
                                    html.Td(f"{lv['requests']:,}"),
                                    html.Td(_ms(lv["observed_itl_p50_ms"], 2)),
                                    html.Td(_ms(lv["model_itl_ms"], 2)),
                                    html.Td(_ms(lv["calibrated_itl_ms"], 2)),
                                    html.Td(_ms(lv["observed_ttft_p50_ms"])),
                                    html.Td(_ms(lv["model_ttft_ms"])),
                                    html.Td(_ms(lv["calibrated_ttft_ms"])),
                                ]
                            )
                            for lv in levels
                        ]
                    ),
                ],
                className="table",
            ),
        ]
    words = (
        f"At {raw['concurrency']:.1f} requests in flight ({out['concurrency_from']}), over "
        f"{out['mix']}. Source: {raw['source']} ({raw['library']}); architecture from "
        f"{raw['model_config']}. Calibration: decode ×{corr['decode']:.2f}, prefill "
        f"×{corr['prefill']:.2f}, fitted on {corr['decode_levels']} in-flight levels"
        + (" (clamped to 0.5–2: check the profile's GPU, dtype and TP)" if corr["clamped"] else "")
        + "."
    )
    notes = [html.Li(n) for n in raw["notes"]]
    return html.Div(
        [
            html.H3("Latency at the observed load"),
            table,
            html.P(words, className="kpi-delta"),
            *level_table,
            html.Ul(notes, className="notes") if notes else html.Div(),
        ],
        className="card",
        id=ids.RIGHTSIZING_PERFORMANCE,
    )
