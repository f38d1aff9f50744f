"""What drift needs of an engine's traffic: last week vs the week before, and requests beyond
its bounds (DESIGN §7)."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb

from app.analytics import weighted
from app.analytics.filters import Filter
from app.storage.rows import first_row

WEEK = timedelta(days=7)


def _empty_week() -> dict:
    return {
        "requests": 0,
        "isl_p99": None,
        "osl_p99": None,
        "isl_p999": None,
        "seq_p999": None,
        "ttft_p95": None,
        "arrival_rate": 0.0,
    }


def _float(value) -> float | None:
    return None if value is None else float(value)


def _weeks(cur: duckdb.DuckDBPyConnection, where: str, params: list) -> list[tuple]:
    """One scan for both weeks: grouping by the week a row falls in."""
    return cur.execute(
        "SELECT started_at >= ? AS last, count(*), quantile_cont(isl, [0.99, 0.999]), "
        "quantile_cont(osl, 0.99), quantile_cont(isl + osl, 0.999), quantile_cont(ttft_ms, 0.95) "
        f"FROM requests WHERE {where} GROUP BY 1",
        params,
    ).fetchall()


def _weighted_weeks(cur: duckdb.DuckDBPyConnection, where: str, params: list) -> list[tuple]:
    """_weeks over sampled rows: weighted counts and quantiles, in the same row layout."""
    source = f"(SELECT started_at >= ? AS last, * FROM requests WHERE {where})"
    counts = cur.execute(
        f"SELECT last, {weighted.count_sql(True)} FROM {source} GROUP BY 1", params
    ).fetchall()
    found = weighted.quantiles(
        cur, source, params, ("last",), ("isl", "osl", "isl + osl", "ttft_ms"), (0.95, 0.99, 0.999)
    )

    def q(last: bool, measure: str, k: int) -> float | None:
        return (found.get((last, measure)) or [None] * 3)[k]

    return [
        (
            last,
            n,
            [q(last, "isl", 1), q(last, "isl", 2)],
            q(last, "osl", 1),
            q(last, "isl + osl", 2),
            q(last, "ttft_ms", 0),
        )
        for last, n in counts
    ]


def engine_weeks(cur: duckdb.DuckDBPyConnection, engine: str, end: datetime) -> dict:
    """Requests, p99 ISL/OSL, p99.9 ISL and ISL + OSL, TTFT p95 and requests/s of the week
    [end - 7d, end) ("last") and [end - 14d, end - 7d) ("previous"); None where no data
    (weighted by 1/sample_rate when the weeks hold sampled rows)."""
    flt = Filter(start=end - 2 * WEEK, end=end, engines=(engine,))
    where, params = flt.where()
    if weighted.is_sampled(cur, flt):
        rows = _weighted_weeks(cur, where, [end - WEEK] + params)
    else:
        rows = _weeks(cur, where, [end - WEEK] + params)
    # Rates over the time the engine has been seen: a week it started in the middle of is not
    # a week of zero traffic followed by a jump.
    first = first_row(cur, "SELECT min(started_at) FROM requests WHERE engine = ?", [engine])
    first_seen = first[0] if first and first[0] is not None else end - 2 * WEEK

    def covered(week_start: datetime) -> float:
        return max((week_start + WEEK - max(week_start, first_seen)).total_seconds(), 1.0)

    out = {"last": _empty_week(), "previous": _empty_week()}
    for last, n, isl_q, osl_p99, seq_p999, ttft_p95 in rows:
        week_start = end - WEEK if last else end - 2 * WEEK
        out["last" if last else "previous"] = {
            "requests": int(n),
            "isl_p99": _float(isl_q[0]),
            "osl_p99": _float(osl_p99),
            "isl_p999": _float(isl_q[1]),
            "seq_p999": _float(seq_p999),
            "ttft_p95": _float(ttft_p95),  # quantile_cont skips nulls; None when all are null
            "arrival_rate": int(n) / covered(week_start),
        }
    return out


def beyond(
    cur: duckdb.DuckDBPyConnection,
    engine: str,
    start: datetime,
    end: datetime,
    max_input_len: int | None,
    max_seq_len: int | None,
) -> tuple[int | None, int | None, int]:
    """Requests in [start, end) with ISL > max_input_len, with ISL + OSL > max_seq_len, and all
    of them; a count is None when its bound is unset."""
    where, params = Filter(start=start, end=end, engines=(engine,)).where()
    parts, args = ["count(*)"], []
    if max_input_len is not None:
        parts.append("count(*) FILTER (WHERE isl > ?)")
        args.append(max_input_len)
    if max_seq_len is not None:
        parts.append("count(*) FILTER (WHERE isl + osl > ?)")
        args.append(max_seq_len)
    row = first_row(cur, f"SELECT {', '.join(parts)} FROM requests WHERE {where}", args + params)
    assert row is not None  # an aggregate without GROUP BY always returns one row
    values = iter(int(v) for v in row[1:])
    n_input = next(values) if max_input_len is not None else None
    n_seq = next(values) if max_seq_len is not None else None
    return n_input, n_seq, int(row[0])
