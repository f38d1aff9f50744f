"""The overview numbers: totals per model and the time span of the stored traffic."""

from __future__ import annotations

import duckdb
import pandas as pd

from app.analytics import rollups, weighted
from app.analytics.filters import Filter
from app.storage import tiers
from app.storage.rollups import RELATIVE_ERROR
from app.storage.rows import first_row
from app.storage.schema import AZURE_GATEWAY


def per_model(
    cur: duckdb.DuckDBPyConnection, flt: Filter | None = None, *, exact: bool = True
) -> pd.DataFrame:
    """Requests, token quantiles, TTFT p50/p99 and error share per model, busiest first.

    Unless `exact`, windows of a day or more read the hourly rollups: counts and shares exact,
    quantiles within RELATIVE_ERROR (`frame.attrs["relative_error"]`, else 0)."""
    flt = flt or Filter()
    if not exact and (sp := rollups.split(cur, flt)) is not None:
        stats = rollups.value_stats(cur, flt, sp, (0.5, 0.99), by_model=True)
        if stats is not None:
            frame = pd.DataFrame(
                [_model_row(model, group) for model, group in stats.items()],
                columns=MODEL_COLUMNS,
            ).sort_values(["requests", "model"], ascending=[False, True], ignore_index=True)
            frame.attrs["relative_error"] = RELATIVE_ERROR
            return frame
    where, params = flt.where()
    if weighted.is_sampled(cur, flt):
        return _weighted_per_model(cur, where, params)
    frame = cur.execute(
        f"""
        SELECT model,
               count(*) AS requests,
               quantile_cont(isl, 0.5) AS isl_p50,
               quantile_cont(isl, 0.99) AS isl_p99,
               quantile_cont(osl, 0.5) AS osl_p50,
               quantile_cont(osl, 0.99) AS osl_p99,
               quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms,
               quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms,
               avg(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS error_share
        FROM requests WHERE {where} GROUP BY model ORDER BY requests DESC, model
        """,
        params,
    ).df()
    frame.attrs["relative_error"] = 0.0
    return frame


NOT_OK = "status <> 'ok'"


def _weighted_per_model(cur: duckdb.DuckDBPyConnection, where: str, params: list) -> pd.DataFrame:
    """per_model's exact path over a window holding sampled rows."""
    frame = cur.execute(
        f"SELECT model, {weighted.count_sql(True)} AS requests, "
        f"{weighted.share_sql(NOT_OK, True)} AS error_share "
        f"FROM requests WHERE {where} GROUP BY model ORDER BY requests DESC, model",
        params,
    ).df()
    found = weighted.quantiles(
        cur,
        f"(SELECT * FROM requests WHERE {where})",
        params,
        ("model",),
        ("isl", "osl", "ttft_ms"),
        (0.5, 0.99),
    )
    for measure, prefix in (("isl", "isl"), ("osl", "osl"), ("ttft_ms", "ttft")):
        unit = "_ms" if measure == "ttft_ms" else ""
        for k, name in enumerate(("p50", "p99")):
            frame[f"{prefix}_{name}{unit}"] = [
                (found.get((m, measure)) or [None, None])[k] for m in frame["model"]
            ]
    frame = frame[list(MODEL_COLUMNS)]
    frame.attrs["relative_error"] = 0.0
    return frame


MODEL_COLUMNS = (
    "model",
    "requests",
    "isl_p50",
    "isl_p99",
    "osl_p50",
    "osl_p99",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "error_share",
)


def _model_row(model: str | None, group: rollups.GroupStats) -> tuple:
    isl, osl, ttft = (group.measures[m] for m in ("isl", "osl", "ttft_ms"))
    requests = isl.n if isl else 0

    def q(stats: rollups.MeasureStats | None, k: int) -> float | None:
        return None if stats is None else stats.quantiles[k]

    share = group.not_ok / requests if requests else 0.0
    return (
        model,
        requests,
        q(isl, 0),
        q(isl, 1),
        q(osl, 0),
        q(osl, 1),
        q(ttft, 0),
        q(ttft, 1),
        share,
    )


def span(cur: duckdb.DuckDBPyConnection) -> dict:
    """First and last start time, requests (estimated when sampled), gateways, and whether
    the Azure trace is present."""
    sampled = weighted.is_sampled(cur, Filter())
    row = first_row(
        cur,
        f"SELECT min(started_at), max(started_at), {weighted.count_sql(sampled)}, "
        "count(DISTINCT gateway), count(*) FILTER (WHERE gateway = ?) FROM requests",
        [AZURE_GATEWAY],
    )
    assert row is not None
    first, last, requests = row[0], row[1], int(row[2])
    # Hours whose raw rows are gone (retention, a lake import) are counted from the rollups,
    # which count every request of every clean hour: then the rollup count is the count.
    held = first_row(
        cur,
        "SELECT min(hour), max(hour) + INTERVAL 1 HOUR FROM rollup_hours WHERE source <> 'raw'",
    )
    if held and held[0] is not None and (sp := rollups.split(cur, Filter())) is not None:
        if (found := rollups.request_count(cur, Filter(), sp)) is not None:
            requests = round(found)
            first = held[0] if first is None else min(first, held[0])
            last = held[1] if last is None else max(last, held[1])
    return {
        "first": first,
        "last": last,
        "requests": requests,
        "gateways": int(row[3]),
        "azure_rows": int(row[4]),
    }


DIMENSIONS = ("model", "engine", "gateway", "tenant")
# Where each column's values outlive raw rows (sealed hours, lake imports): the smallest rollup
# table that has it. The daily tier holds every hour the hourly tiers hold (their retentions
# nest: full grain <= without tenant <= daily), at a fifth of the rows of the hourly tier
# without tenant; tenants are kept only at full grain.
ROLLED = {
    "model": tiers.table("daily", "shapes"),
    "engine": tiers.table("daily", "shapes"),
    "gateway": tiers.table("daily", "shapes"),
    "tenant": tiers.table("hourly", "shapes"),
}


def rollup_version(cur: duckdb.DuckDBPyConnection) -> tuple[int, str]:
    """Hours the rollups hold and when one was last built: changes whenever their rows do (a
    rebuild, a fold, a lake import, a prune), so a cache of what they hold can key on it."""
    row = first_row(cur, "SELECT count(*), coalesce(max(built_at)::VARCHAR, '') FROM rollup_hours")
    return (int(row[0]), str(row[1])) if row else (0, "")


def dimension_values(cur: duckdb.DuckDBPyConnection, limit: int = 200) -> dict[str, list[str]]:
    """Distinct values of each filterable column, for the filter bar's choices: those of the
    raw rows and of the rollups (a model seen only in hours whose raw rows are gone counts
    too), the first `limit` in order."""
    out: dict[str, list[str]] = {}
    for column in DIMENSIONS:  # names from fixed tables, never from the user
        rows = cur.execute(
            f"SELECT v FROM (SELECT DISTINCT {column} AS v FROM requests "
            f"WHERE {column} IS NOT NULL UNION SELECT DISTINCT {column} FROM {ROLLED[column]} "
            f"WHERE {column} IS NOT NULL) ORDER BY 1 LIMIT ?",
            [limit],
        ).fetchall()
        out[column] = [r[0] for r in rows]
    return out


LATENCIES = ("ttft_ms", "itl_ms", "e2e_ms")
KPI_QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def kpis(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = True
) -> dict[str, float | None]:
    """Requests, tokens, error rate and TTFT/ITL/E2E p50/p95/p99 of a window.

    Unless `exact`, windows of a day or more read the hourly rollups: counts, tokens and the
    error rate exact, latency quantiles within `relative_error` (0 when exact)."""
    if not exact and (sp := rollups.split(cur, flt)) is not None:
        stats = rollups.value_stats(cur, flt, sp, tuple(p for _, p in KPI_QUANTILES))
        if stats is not None:
            group = next(iter(stats.values()))
            isl, osl = group.measures["isl"], group.measures["osl"]
            requests = isl.n if isl else 0
            out: dict[str, float | None] = {
                "requests": requests,
                "input_tokens": int(isl.total) if isl else 0,
                "output_tokens": int(osl.total) if osl else 0,
                "error_rate": group.not_ok / requests if requests else None,
                "relative_error": RELATIVE_ERROR,
            }
            for m in LATENCIES:
                found = group.measures[m]
                for k, (name, _) in enumerate(KPI_QUANTILES):
                    out[f"{m}_{name}"] = None if found is None else found.quantiles[k]
            return out
    where, params = flt.where()
    sampled = weighted.is_sampled(cur, flt)
    qs = [p for _, p in KPI_QUANTILES]
    # Sampled: the quantiles come from the weighted query below; NULL placeholders keep the
    # row's layout.
    parts = ", ".join("NULL" if sampled else f"quantile_cont({m}, {qs})" for m in LATENCIES)
    row = first_row(
        cur,
        f"SELECT {weighted.count_sql(sampled)}, "
        f"coalesce({weighted.sum_sql('isl', sampled)}, 0), "
        f"coalesce({weighted.sum_sql('osl', sampled)}, 0), "
        f"{weighted.share_sql(NOT_OK, sampled)}, {parts} FROM requests WHERE {where}",
        params,
    )
    if sampled and row is not None:
        source = f"(SELECT * FROM requests WHERE {where})"
        latencies = weighted.quantiles(cur, source, params, (), LATENCIES, tuple(qs))
        row = (*row[:4], *(latencies.get((m,)) for m in LATENCIES))
    assert row is not None
    out = {
        "requests": int(row[0]),
        "input_tokens": int(row[1]),
        "output_tokens": int(row[2]),
        "error_rate": None if row[3] is None else float(row[3]),
        "relative_error": 0.0,
    }
    for k, m in enumerate(LATENCIES):
        values = row[4 + k] or [None] * len(KPI_QUANTILES)
        for (name, _), v in zip(KPI_QUANTILES, values, strict=True):
            out[f"{m}_{name}"] = None if v is None else float(v)
    return out
