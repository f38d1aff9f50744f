"""The rollup tiers above the hourly rollups at full grain, kept in step with them.

Three tiers (schema.TIERS), each its own four tables (shapes, values, gaps, ttft):
- `hourly`: UTC hours at full grain (`rollup_*`, app/storage/rollups.py builds them);
- `hourly_nt`: the same hours without `tenant` (`rollup_nt_*`), for longer windows;
- `daily`: local days of the configured time zone without `tenant` (`rollup_day_*`); a row's
  `hour` is the start instant of its day, so a day of 23 or 25 hours (DST) is one row.

Each tier is rebuilt from the one below: rows merge by summing counts and sums and taking
maxima. `rollup_hours` holds one row per UTC hour that has rollups: the day it belongs to (fixed
when first built, so a later change of time zone never splits a day), where its rows came from
(`raw`: rebuilt from raw rows; `sealed`: retention pruned its raw rows, the rollups are now the
record; `lake`: imported) and which tiers still hold it (each prunes by its own retention).

Raw rows only ever grow between rebuilds of an hour (retention deletes whole hours and seals
them), so a rebuilt hour is a superset of what it was: the daily tier takes the difference
(the new hour's rows minus its old rows, whose maxima the new ones bound) and stays exact even
once the hourly tiers no longer hold the day's other hours.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import duckdb

from app.storage.rows import first_row
from app.storage.schema import DERIVED, DERIVED_TABLES, KINDS, ROLLUP_TABLES, TIERS

# Bins that key a row beside the time and dimensions; the rest are summed except maxima.
KEYS = {
    "shapes": ("ib", "ob"),
    "values": ("measure", "b"),
    "gaps": ("pb", "b"),
    "ttft": ("ib", "b"),
}
MAXIMA = ("vmax",)
DIMS = ("model", "engine", "gateway", "tenant", "status")
SOURCES = ("raw", "sealed", "lake")


def table(tier: str, kind: str) -> str:
    """The table of `kind` in `tier` (names from schema.TIERS and schema.DERIVED only)."""
    prefix = TIERS[tier][0] if tier in TIERS else DERIVED[tier][0]
    return f"{prefix}{kind}"


def columns(tier: str, kind: str) -> list[str]:
    """The table's columns, in order."""
    found = ROLLUP_TABLES[tier, kind] if tier in TIERS else DERIVED_TABLES[tier, kind]
    return [c.name for c in found.columns]


def derive(con: duckdb.DuckDBPyConnection, days: list[datetime]) -> None:
    """Rebuild the derived daily tiers' rows of `days` (day keys) from their daily rows, and
    stamp the days (inside the transaction that changed the daily rows)."""
    if not days:
        return
    for tier in DERIVED:
        for kind in KINDS:
            picks = _derived_picks(tier, kind)
            target = table(tier, kind)
            # The range lets DuckDB skip row groups by their min/max before the list test.
            where = "hour >= ? AND hour <= ? AND list_contains(?, hour)"
            keys = [min(days), max(days), days]
            con.execute(f"DELETE FROM {target} WHERE {where}", keys)
            con.execute(
                f"INSERT INTO {target} SELECT {picks} FROM {table('daily', kind)} "
                f"WHERE {where} GROUP BY ALL HAVING sum(n) > 0",
                keys,
            )
    _stamp_derived(con, days)


def _derived_picks(tier: str, kind: str) -> str:
    """The SELECT list that regroups daily rows into the derived `tier` (GROUP BY ALL)."""
    picks = []
    for name in columns(tier, kind):
        if name == "hour" or name in DIMS or name in KEYS[kind]:
            picks.append(name)
        elif name in MAXIMA:
            picks.append(f"max({name})")
        elif name == "bad":  # the weight of requests not ok (the status column goes)
            picks.append("sum(CASE WHEN status <> 'ok' THEN w ELSE 0 END)")
        else:
            picks.append(f"sum({name})")
    return ", ".join(picks)


def _stamp_derived(con: duckdb.DuckDBPyConnection, days: list[datetime]) -> None:
    """Record that the derived rows of `days` are as new as their hours."""
    con.execute(
        "INSERT INTO rollup_derived SELECT d, get_current_timestamp() "
        "FROM unnest(?::TIMESTAMPTZ[]) AS t(d) "
        "ON CONFLICT (day) DO UPDATE SET built_at = excluded.built_at",
        [days],
    )


def _underive(con: duckdb.DuckDBPyConnection, days: list[datetime]) -> None:
    """Drop the derived rows and stamps of `days` (the daily tier no longer holds them)."""
    for tier in DERIVED:
        for kind in KINDS:
            con.execute(f"DELETE FROM {table(tier, kind)} WHERE list_contains(?, hour)", [days])
    con.execute("DELETE FROM rollup_derived WHERE list_contains(?, day)", [days])


def _select(tier: str, kind: str, time: str = "hour", sign: int = 1) -> str:
    """The SELECT list that regroups rows of any tier into `tier`'s columns (GROUP BY ALL):
    `time` as the hour, sums (times `sign`: -1 subtracts rows) and maxima."""
    out = []
    for name in columns(tier, kind):
        if name == "hour":
            out.append(f"{time} AS hour")
        elif name in DIMS or name in KEYS[kind]:
            out.append(name)
        elif name in MAXIMA:
            out.append(f"max({name}) AS {name}")
        else:
            out.append(f"sum({'-' if sign < 0 else ''}{name}) AS {name}")
    return ", ".join(out)


def _plain(tier: str, kind: str, time: str = "hour") -> str:
    """`tier`'s columns of rows of `tier` or a finer tier, unaggregated."""
    return ", ".join(time if c == "hour" else c for c in columns(tier, kind))


def note_hours(
    con: duckdb.DuckDBPyConnection,
    hours: list[datetime],
    source: str,
    tz: str,
    origin: str | None = None,
) -> None:
    """Record `hours` as held by every tier, from `source`; a new hour's day is its local day in
    `tz`, a known hour keeps its day. Call inside the transaction that writes their rows."""
    if source not in SOURCES:
        raise ValueError(f"unknown rollup source {source!r}")
    con.execute(
        "INSERT INTO rollup_hours SELECT h, timezone(?, date_trunc('day', timezone(?, h))), ?, ?, "
        "true, true, true, get_current_timestamp() FROM unnest(?::TIMESTAMPTZ[]) AS t(h) "
        "ON CONFLICT (hour) DO UPDATE SET source = excluded.source, origin = excluded.origin, "
        "in_full = true, in_nt = true, in_day = true, built_at = excluded.built_at",
        [tz, tz, source, origin, hours],
    )


def _days_of(con: duckdb.DuckDBPyConnection, hours: list[datetime]) -> list[datetime]:
    rows = con.execute(
        "SELECT DISTINCT day FROM rollup_hours WHERE list_contains(?, hour)", [hours]
    ).fetchall()
    return [r[0] for r in rows]


def _merge(
    con: duckdb.DuckDBPyConnection,
    tier: str,
    kind: str,
    keys: list[datetime],
    extra: str,
    params: list,
) -> None:
    """Rows of `tier` at the `hour` values `keys` := regrouped (those rows ∪ `extra`, a SELECT
    of `tier`'s columns); buckets left with no request are dropped."""
    target = table(tier, kind)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _tier_merge AS SELECT {_select(tier, kind)} FROM ("
        f"SELECT * FROM {target} WHERE list_contains(?, hour) UNION ALL {extra}"
        ") GROUP BY ALL HAVING sum(n) > 0",
        [keys, *params],
    )
    con.execute(f"DELETE FROM {target} WHERE list_contains(?, hour)", [keys])
    con.execute(f"INSERT INTO {target} SELECT * FROM _tier_merge")
    con.execute("DROP TABLE _tier_merge")


def _day_rows(kind: str, source_tier: str, sign: int) -> str:
    """SELECT of daily-tier rows from `source_tier` rows of the hours in the bound list (each
    hour mapped to its day through rollup_hours), their sums times `sign`."""
    src = table(source_tier, kind)
    return (
        f"SELECT {_select('daily', kind, 'r.day', sign)} FROM {src} t "
        "JOIN rollup_hours r ON r.hour = t.hour WHERE list_contains(?, t.hour) GROUP BY ALL"
    )


def begin_replace(con: duckdb.DuckDBPyConnection, hours: list[datetime]) -> None:
    """Take the hours' current rows out of the daily tier, before their hourly rows are
    replaced (inside the transaction; finish with `end_replace`)."""
    days = _days_of(con, hours)
    if not days:
        return
    for kind in KINDS:
        _merge(con, "daily", kind, days, _day_rows(kind, "hourly_nt", -1), [hours])


def end_replace(con: duckdb.DuckDBPyConnection, hours: list[datetime]) -> None:
    """After the hours' full-grain rows were written (and `note_hours`): rebuild their
    hourly-without-tenant rows and add them to their days."""
    for kind in KINDS:
        nt = table("hourly_nt", kind)
        con.execute(f"DELETE FROM {nt} WHERE list_contains(?, hour)", [hours])
        con.execute(
            f"INSERT INTO {nt} SELECT {_select('hourly_nt', kind)} FROM {table('hourly', kind)} "
            "WHERE list_contains(?, hour) GROUP BY ALL",
            [hours],
        )
    days = _days_of(con, hours)
    for kind in KINDS:
        _merge(con, "daily", kind, days, _day_rows(kind, "hourly_nt", 1), [hours])
    derive(con, days)


def _key(tier: str, kind: str) -> list[str]:
    """The columns that identify a row of `tier`'s `kind` table (its cell)."""
    return [c for c in columns(tier, kind) if c == "hour" or c in DIMS or c in KEYS[kind]]


def _same(alias: str, other: str, cols: list[str]) -> str:
    """`alias`'s and `other`'s `cols` are equal, NULL to NULL (engine and tenant may be NULL)."""
    return " AND ".join(f"{alias}.{c} IS NOT DISTINCT FROM {other}.{c}" for c in cols)


def _touched(alias: str, cols: list[str]) -> str:
    """A condition on `alias`'s rows: their cell (`cols`) is one of _tier_delta's."""
    return f"EXISTS (SELECT 1 FROM _tier_delta k WHERE {_same(alias, 'k', cols)})"


def _write_changes(
    con: duckdb.DuckDBPyConnection, target: str, cols: list[str], where: str, params: list
) -> None:
    """Make `target`'s rows matching `where` those of _tier_new, writing only the rows that
    differ: _tier_gone gets the rows taken out, _tier_came the rows put in.

    Deleting and inserting a row costs DuckDB far more than comparing it (its commit and
    checkpoint rewrite the row groups touched): a late row changes a few cells of its hour,
    and only those are written (and any cell whose sums came out different in the last bit,
    added up in another order: rewritten, still right)."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _tier_gone AS "
        f"SELECT * FROM {target} WHERE {where} EXCEPT SELECT * FROM _tier_new",
        params,
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _tier_came AS "
        f"SELECT * FROM _tier_new EXCEPT SELECT * FROM {target} WHERE {where}",
        params,
    )
    con.execute(
        f"DELETE FROM {target} d WHERE {where} "
        f"AND EXISTS (SELECT 1 FROM _tier_gone g WHERE {_same('d', 'g', cols)})",
        params,
    )
    con.execute(f"INSERT INTO {target} SELECT * FROM _tier_came")


def replace(
    con: duckdb.DuckDBPyConnection,
    hours: list[datetime],
    tz: str,
    write_full: Callable[[str, str], None],
) -> None:
    """Rebuild raw `hours` in every tier, set-based, inside the caller's transaction: they are
    noted (`note_hours`, source raw) and `write_full(kind, table)` inserts their new
    full-grain rows into `table`. Hours that had rollups get only the rows that differ, in
    the full-grain and hourly-without-tenant tiers; the daily and derived tiers change only
    in the cells the changed rows fall in, by the new rows minus the old.

    The same rows as `begin_replace` … `end_replace` (raw hours only grow between rebuilds,
    so the new maxima bound the old), but what a rebuild writes follows what changed: a late
    row rewrites the few cells it lands in, not its hour's and its whole day's."""
    if not hours:
        return
    known = {
        r[0]
        for r in con.execute(
            "SELECT hour FROM rollup_hours WHERE hour IN (SELECT unnest(?::TIMESTAMPTZ[]))",
            [hours],
        ).fetchall()
    }
    note_hours(con, hours, "raw", tz)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _tier_hours AS SELECT hour, day FROM rollup_hours "
        "WHERE hour IN (SELECT unnest(?::TIMESTAMPTZ[]))",
        [hours],
    )
    # The ranges let DuckDB skip row groups by their min/max time before the semi-joins.
    span = [min(hours), max(hours)]
    row = con.execute("SELECT min(day), max(day), list(DISTINCT day) FROM _tier_hours").fetchone()
    assert row is not None
    day_span, days = [row[0], row[1]], row[2]
    in_hours = "hour >= ? AND hour <= ? AND hour IN (SELECT hour FROM _tier_hours)"
    by_day = "SELECT {} FROM {} t JOIN _tier_hours h ON h.hour = t.hour {} GROUP BY ALL"
    for kind in KINDS:
        full, nt, daily = (table(t, kind) for t in ("hourly", "hourly_nt", "daily"))
        if not known:  # new hours (a backfill): nothing to compare, rows go straight in
            for target in (full, nt):  # (no rows are expected there: cheap, and certain)
                con.execute(f"DELETE FROM {target} WHERE {in_hours}", span)
            write_full(kind, full)
            con.execute(
                f"INSERT INTO {nt} SELECT {_select('hourly_nt', kind)} FROM {full} "
                f"WHERE {in_hours} GROUP BY ALL",
                span,
            )
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _tier_delta AS "
                + by_day.format(
                    _select("daily", kind, "h.day"), nt, "WHERE t.hour >= ? AND t.hour <= ?"
                ),
                span,
            )
        else:
            con.execute(f"CREATE OR REPLACE TEMP TABLE _tier_new AS SELECT * FROM {full} LIMIT 0")
            write_full(kind, "_tier_new")
            _write_changes(con, full, columns("hourly", kind), in_hours, span)
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _tier_new AS "
                f"SELECT {_select('hourly_nt', kind)} FROM {full} WHERE {in_hours} GROUP BY ALL",
                span,
            )
            _write_changes(con, nt, columns("hourly_nt", kind), in_hours, span)
            # The changed hourly-without-tenant rows' share of their days: new minus old.
            con.execute(
                "CREATE OR REPLACE TEMP TABLE _tier_delta AS "
                + by_day.format(_select("daily", kind, "h.day", -1), "_tier_gone", "")
            )
            con.execute(
                "INSERT INTO _tier_delta "
                + by_day.format(_select("daily", kind, "h.day"), "_tier_came", "")
            )
        changed = first_row(con, "SELECT count(*) FROM _tier_delta")
        if not (changed and changed[0]):
            continue  # the hours' rows are what they were: their days stay as they are
        cells = _touched("d", _key("daily", kind))
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _tier_merge AS SELECT {_select('daily', kind)} FROM ("
            f"SELECT d.* FROM {daily} d WHERE d.hour >= ? AND d.hour <= ? AND {cells} "
            "UNION ALL SELECT * FROM _tier_delta) GROUP BY ALL HAVING sum(n) > 0",
            day_span,
        )
        con.execute(
            f"DELETE FROM {daily} d WHERE d.hour >= ? AND d.hour <= ? AND {cells}", day_span
        )
        con.execute(f"INSERT INTO {daily} SELECT * FROM _tier_merge")
        # Each derived cell the changed daily cells fall in, regrouped from its daily rows.
        for tier in DERIVED:
            target = table(tier, kind)
            derived = _touched("d", _key(tier, kind))
            con.execute(
                f"DELETE FROM {target} d WHERE d.hour >= ? AND d.hour <= ? AND {derived}",
                day_span,
            )
            con.execute(
                f"INSERT INTO {target} SELECT {_derived_picks(tier, kind)} FROM {daily} d "
                f"WHERE d.hour >= ? AND d.hour <= ? AND {derived} GROUP BY ALL HAVING sum(n) > 0",
                day_span,
            )
    _stamp_derived(con, days)
    for temp in ("_tier_new", "_tier_gone", "_tier_came", "_tier_delta", "_tier_merge"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    con.execute("DROP TABLE _tier_hours")


def fold(con: duckdb.DuckDBPyConnection, hours: list[datetime], delta: dict[str, str]) -> None:
    """Add rows to sealed hours (late rows of an hour whose raw rows retention pruned): `delta`
    maps each kind to a temp table of full-grain rows of `hours`; each tier that still holds
    an hour gets them merged in."""
    held = {
        flag: [
            r[0]
            for r in con.execute(
                f"SELECT hour FROM rollup_hours WHERE list_contains(?, hour) AND {flag}", [hours]
            ).fetchall()
        ]
        for flag in ("in_full", "in_nt", "in_day")
    }
    # Their rows changed: a node pushing rollups sends hours rebuilt since its last round.
    con.execute(
        "UPDATE rollup_hours SET built_at = get_current_timestamp() WHERE list_contains(?, hour)",
        [hours],
    )
    for kind, temp in delta.items():
        if held["in_full"]:
            _merge(
                con,
                "hourly",
                kind,
                held["in_full"],
                f"SELECT * FROM {temp} WHERE list_contains(?, hour)",
                [held["in_full"]],
            )
        if held["in_nt"]:
            _merge(
                con,
                "hourly_nt",
                kind,
                held["in_nt"],
                f"SELECT {_select('hourly_nt', kind)} FROM {temp} WHERE list_contains(?, hour) "
                "GROUP BY ALL",
                [held["in_nt"]],
            )
        if held["in_day"]:
            days = _days_of(con, held["in_day"])
            _merge(
                con,
                "daily",
                kind,
                days,
                f"SELECT {_select('daily', kind, 'r.day')} FROM {temp} t JOIN rollup_hours r "
                "ON r.hour = t.hour WHERE list_contains(?, t.hour) GROUP BY ALL",
                [held["in_day"]],
            )
    if held["in_day"]:
        derive(con, _days_of(con, held["in_day"]))


def seal(con: duckdb.DuckDBPyConnection, hours: list[datetime], tz: str) -> None:
    """Mark `hours` sealed: retention is deleting their raw rows, their rollups are the record
    from now on (inside the transaction that deletes them)."""
    con.execute(
        "INSERT INTO rollup_hours SELECT h, timezone(?, date_trunc('day', timezone(?, h))), "
        "'sealed', NULL, true, true, true, get_current_timestamp() "
        "FROM unnest(?::TIMESTAMPTZ[]) AS t(h) "
        "ON CONFLICT (hour) DO UPDATE SET source = 'sealed' WHERE rollup_hours.source = 'raw'",
        [tz, tz, hours],
    )


def prune(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    *,
    hourly_days: int,
    hourly_nt_days: int,
    daily_days: int,
) -> dict[str, int]:
    """Drop each tier's hours (days) past its retention (0: keep forever), oldest first; an
    hour whose raw rows are still stored stays in every tier (rebuilds need them). Returns
    the hours (days) dropped per tier, in one transaction."""
    dropped: dict[str, int] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        for tier, flag, days in (
            ("hourly", "in_full", hourly_days),
            ("hourly_nt", "in_nt", hourly_nt_days),
        ):
            if days <= 0:
                continue
            cut = now - timedelta(days=days)
            hours = [
                r[0]
                for r in con.execute(
                    f"SELECT hour FROM rollup_hours WHERE {flag} AND source <> 'raw' AND hour < ?",
                    [cut],
                ).fetchall()
            ]
            dropped[tier] = len(hours)
            if hours:
                for kind in KINDS:
                    con.execute(
                        f"DELETE FROM {table(tier, kind)} "
                        "WHERE hour < ? AND list_contains(?, hour)",
                        [cut, hours],
                    )
                con.execute(
                    f"UPDATE rollup_hours SET {flag} = false WHERE list_contains(?, hour)", [hours]
                )
        if daily_days > 0:
            cut = now - timedelta(days=daily_days)
            days_due = [
                r[0]
                for r in con.execute(
                    "SELECT day FROM rollup_hours WHERE in_day GROUP BY day "
                    "HAVING bool_and(source <> 'raw') AND max(hour) + INTERVAL 1 HOUR <= ?",
                    [cut],
                ).fetchall()
            ]
            dropped["daily"] = len(days_due)
            if days_due:
                for kind in KINDS:
                    con.execute(
                        f"DELETE FROM {table('daily', kind)} WHERE list_contains(?, hour)",
                        [days_due],
                    )
                con.execute(
                    "UPDATE rollup_hours SET in_day = false WHERE list_contains(?, day)", [days_due]
                )
                _underive(con, days_due)
        con.execute("DELETE FROM rollup_hours WHERE NOT (in_full OR in_nt OR in_day)")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return dropped


def hours_by_tier(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Hours each tier holds (days for the daily tier), and hours per source, for health."""
    row = con.execute(
        "SELECT count(*) FILTER (WHERE in_full), count(*) FILTER (WHERE in_nt), "
        "count(DISTINCT day) FILTER (WHERE in_day), count(*) FILTER (WHERE source = 'raw'), "
        "count(*) FILTER (WHERE source = 'sealed'), count(*) FILTER (WHERE source = 'lake') "
        "FROM rollup_hours"
    ).fetchone()
    names = ("hourly", "hourly_nt", "daily_days", "raw", "sealed", "lake")
    return dict(zip(names, (int(v) for v in row), strict=True)) if row else {}
