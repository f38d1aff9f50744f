"""Lake rollups into the tiers: `lake import` of the Spark job's layout, POST /v1/rollups, and
`lake push` from a regional node to a central one. A node A with demo traffic writes its own
rollups in the job's layout (DuckDB COPY … PARTITION_BY (day), the manifests as the job
writes them); a node B that imports them holds the same tiers, key for key (counts and
maxima exactly, sums within 1e-12 relative), and keeps them through its own rebuilds."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tarfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from app.cli import lake_sync
from app.config import Settings
from app.storage import lake, rollups, tiers
from app.storage.schema import KINDS
from tests.support.database import copy_database, open_migrated
from tests.support.demo import END
from tests.support.net import free_port
from tests.support.server import PASSWORD, LiveServer, serve, server_settings

H = timedelta(hours=1)
ISO = "%Y-%m-%dT%H:%M:%SZ"
TIER_NAMES = ("hourly", "hourly_nt", "daily")
SUMS = {"w", "vsum", "sx", "sy", "sxy", "sxx"}
EXACT = {"n", "vmax"}


@pytest.fixture(scope="module")
def node_a(demo_template) -> Path:
    """Node A: three days of demo traffic (two gateways, nulls, zeros, per-token gaps) and
    its rollups, rebuilt from the raw rows."""
    return demo_template(requests=5_000, days=3, end=END)


@pytest.fixture(scope="module")
def a_con(node_a: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(node_a), read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def a_hours(a_con) -> list[datetime]:
    return [r[0] for r in a_con.execute("SELECT hour FROM rollup_hours ORDER BY hour").fetchall()]


@pytest.fixture(scope="module")
def a_days(a_con) -> list[datetime]:
    rows = a_con.execute("SELECT DISTINCT day FROM rollup_hours ORDER BY day").fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def empty_b(db_template: Path, tmp_path: Path) -> Path:
    """Node B's file: migrated, no rows."""
    return copy_database(db_template, tmp_path / "b.duckdb")


# --- the layout, written from a database's own rollup tables ---------------------------------


def write_layout(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    *,
    hours: list[datetime] | None = None,
    days: list[datetime] | None = None,
    gateway: str | None = None,
) -> Path:
    """The job's layout under `out`: the hourly tier for `hours`, the daily tier for `days`
    (start instants), only `gateway`'s rows when given; each tier's _manifest.json with its
    partitions, as app/lake/job.py writes them."""
    for tier, keys in (("hourly", hours), ("daily", days)):
        if not keys:
            continue
        base = out / tier
        base.mkdir(parents=True, exist_ok=True)
        only = "AND gateway = ?" if gateway else ""
        extra = [gateway] if gateway else []
        counts = {}
        for kind in KINDS:
            table = tiers.table(tier, kind)
            # The partition key: the UTC day of an hour, the local (here UTC) day of a day.
            counts[kind] = con.execute(
                f"SELECT count(*) FROM {table} WHERE list_contains(?, hour) {only}", [keys, *extra]
            ).fetchone()[0]
            if counts[kind]:
                con.execute(
                    f"COPY (SELECT *, strftime(hour AT TIME ZONE 'UTC', '%Y-%m-%d') AS day "
                    f"FROM {table} WHERE list_contains(?, hour) {only}) "
                    "TO ? (FORMAT parquet, PARTITION_BY (day))",
                    [keys, *extra, str(base / kind)],
                )
        spans = con.execute(
            "SELECT strftime(day AT TIME ZONE 'UTC', '%Y-%m-%d'), min(hour), max(hour), count(*) "
            f"FROM rollup_hours WHERE list_contains(?, {'hour' if tier == 'hourly' else 'day'}) "
            "GROUP BY ALL ORDER BY 1",
            [keys],
        ).fetchall()
        manifest = {
            "schema_version": 1,
            "kind": "tokenshape-lake-rollups",
            "tier": tier,
            "grain": "hour" if tier == "hourly" else "day",
            "tz": "UTC",
            "partition_column": "day",
            "constants": dict(lake.CONSTANTS),
            "rows": counts,
            "partitions": {
                day: {"from": f"{lo:{ISO}}", "to": f"{hi + H:{ISO}}", "hours": n}
                for day, lo, hi, n in spans
            },
        }
        (base / "_manifest.json").write_text(json.dumps(manifest, indent=1))
    return out


def edit_manifest(out: Path, tier: str, change: Callable[[dict], None]) -> None:
    path = out / tier / "_manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def rewrite_parquet(out: Path, tier: str, kind: str, select: str) -> None:
    """Rewrite every file of a table as `select` over its rows (FROM the file as `t`)."""
    con = duckdb.connect()
    for f in sorted((out / tier / kind).rglob("*.parquet")):
        tmp = f.with_name("rewritten.tmp")
        con.execute(
            f"COPY (SELECT {select} FROM read_parquet(?) t) TO ? (FORMAT parquet)",
            [str(f), str(tmp)],
        )
        tmp.replace(f)
    con.close()


def tar_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return buf.getvalue()


# --- comparing tiers ---------------------------------------------------------------------------


def tier_rows(con, tier: str, kind: str, keys: list[datetime] | None = None) -> dict:
    """A tier's rows of one kind by key (time, dimensions, bins) → {value column: value}."""
    cols = tiers.columns(tier, kind)
    key_cols = [c for c in cols if c == "hour" or c in tiers.DIMS or c in tiers.KEYS[kind]]
    value_cols = [c for c in cols if c not in key_cols]
    where = "WHERE list_contains(?, hour)" if keys is not None else ""
    rows = con.execute(
        f"SELECT {', '.join(key_cols + value_cols)} FROM {tiers.table(tier, kind)} {where}",
        [keys] if keys is not None else [],
    ).fetchall()
    out = {r[: len(key_cols)]: dict(zip(value_cols, r[len(key_cols) :], strict=True)) for r in rows}
    assert len(out) == len(rows), f"{tier}/{kind}: duplicate keys"
    return out


def assert_same(a, b, tier: str, kind: str, keys: list[datetime] | None = None) -> int:
    """The tier's rows equal in both: the same keys, counts and maxima exact, sums 1e-12
    relative (compared by DuckDB over both sides' rows as Arrow)."""
    cols = tiers.columns(tier, kind)
    key_cols = [c for c in cols if c == "hour" or c in tiers.DIMS or c in tiers.KEYS[kind]]
    where = "WHERE list_contains(?, hour)" if keys is not None else ""
    params = [keys] if keys is not None else []
    sql = f"SELECT * FROM {tiers.table(tier, kind)} {where}"
    sides = []
    for con in (a, b):
        cur = con.cursor()  # of its own: the caller's may hold an unread result
        sides.append(cur.sql(sql, params=params).to_arrow_table())
        cur.close()
    left, right = sides
    on = " AND ".join(f"l.{c} IS NOT DISTINCT FROM r.{c}" for c in key_cols)
    exact = " OR ".join(f"l.{c} <> r.{c}" for c in cols if c in EXACT)
    sums = " OR ".join(
        f"abs(l.{c} - r.{c}) > 1e-12 * greatest(abs(l.{c}), abs(r.{c}))" for c in cols if c in SUMS
    )
    assert {c for c in cols if c not in key_cols} <= EXACT | SUMS
    con = duckdb.connect()
    con.register("l", left)
    con.register("r", right)
    distinct = "(SELECT count(*) FROM (SELECT DISTINCT {} FROM {}))".format
    keyed = ", ".join(key_cols)
    dupes = con.execute(
        f"SELECT (SELECT count(*) FROM l) - {distinct(keyed, 'l')}, "
        f"(SELECT count(*) FROM r) - {distinct(keyed, 'r')}"
    ).fetchone()
    assert dupes == (0, 0), f"{tier}/{kind}: duplicate keys {dupes}"
    only_l, only_r, differ = con.execute(
        f"SELECT count(*) FILTER (WHERE r.hour IS NULL), count(*) FILTER (WHERE l.hour IS NULL), "
        "count(*) FILTER (WHERE l.hour IS NOT NULL AND r.hour IS NOT NULL "
        f"AND ({exact} OR {sums})) "
        f"FROM l FULL JOIN r ON {on}"
    ).fetchone()
    con.close()
    assert (only_l, only_r, differ) == (0, 0, 0), (
        f"{tier}/{kind}: {only_l} keys missing, {only_r} extra, {differ} with other values"
    )
    return left.num_rows


def assert_same_tiers(a, b, hours: list[datetime] | None = None, days=None) -> int:
    """Every tier equal (hourly tiers at `hours`, the daily tier at `days`, all by default);
    returns the rows compared."""
    compared = 0
    for tier in TIER_NAMES:
        keys = days if tier == "daily" else hours
        for kind in KINDS:
            compared += assert_same(a, b, tier, kind, keys)
    return compared


def lake_cli(*argv: str) -> int:
    """`tokenshape lake import|push …` through this module's parsers."""
    args = lake_cli_args(*argv)
    return args.func(args)


def lake_cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tokenshape lake")
    sub = parser.add_subparsers(dest="lake_command", required=True)
    lake_sync.add_import_parser(sub)
    lake_sync.add_push_parser(sub)
    return parser.parse_args(list(argv))


# --- lake import -------------------------------------------------------------------------------


def test_import_gives_the_same_tiers_and_again_changes_nothing(
    a_con, a_hours, a_days, empty_b, tmp_path, capsys
):
    out = write_layout(a_con, tmp_path / "lake", hours=a_hours, days=a_days)
    assert lake_cli("import", str(out), "--db", str(empty_b), "--origin", "spark-eu") == 0
    printed = capsys.readouterr().out
    assert "lake import: 72 hours and 0 days" in printed and "gw-internal, gw-public" in printed
    with open_migrated(empty_b) as b:
        con = b.cursor()
        assert assert_same_tiers(a_con, con) > 10_000
        sources = con.execute(
            "SELECT source, origin, count(*), bool_and(in_full AND in_nt AND in_day) "
            "FROM rollup_hours GROUP BY ALL"
        ).fetchall()
        assert sources == [("lake", "spark-eu", 72, True)]
        days = con.execute("SELECT DISTINCT day FROM rollup_hours ORDER BY day").fetchall()
        assert [d[0] for d in days] == a_days
        before = {k: tier_rows(con, "hourly", k) for k in KINDS}
    # The same rows again: nothing changes (a push retried, a job run twice).
    assert lake_cli("import", str(out), "--db", str(empty_b), "--origin", "spark-eu") == 0
    with open_migrated(empty_b) as b:
        con = b.cursor()
        assert {k: tier_rows(con, "hourly", k) for k in KINDS} == before
        assert_same_tiers(a_con, con)


def test_imported_hours_survive_a_rebuild_from_other_raw_rows(
    node_a, a_con, a_hours, a_days, tmp_path
):
    # B holds raw rows of its own for the same hours, 40% fewer than A: a rebuild of any
    # hour from them would change its rollups.
    b_path = copy_database(node_a, tmp_path / "b.duckdb")
    out = write_layout(a_con, tmp_path / "lake", hours=a_hours, days=a_days)
    with open_migrated(b_path) as b:
        con = b.cursor()
        con.execute("DELETE FROM requests WHERE hash(request_id) % 5 < 2")
        kept = con.execute("SELECT count(*) FROM requests").fetchone()[0]
        assert 0 < kept < a_con.execute("SELECT count(*) FROM requests").fetchone()[0]
        result = lake.import_layout(con, str(out), tz="UTC", origin="lake-a")
        assert result.hours == 72 and not result.skipped_hours
        assert_same_tiers(a_con, con)
        con.execute(
            "INSERT INTO rollup_dirty SELECT hour, get_current_timestamp() - INTERVAL 1 HOUR "
            "FROM rollup_hours"
        )
        assert rollups.rebuild_all(con) == 72
        assert con.execute("SELECT count(*) FROM rollup_dirty").fetchone()[0] == 0
        assert_same_tiers(a_con, con)
        assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == kept  # raw stays
        assert con.execute("SELECT DISTINCT source FROM rollup_hours").fetchall() == [("lake",)]


def test_days_with_only_daily_rows_then_their_hours(a_con, a_hours, a_days, empty_b, tmp_path):
    # The lake's hourly tier keeps only the last day; its daily tier all three.
    last_day = [h for h in a_hours if h >= a_days[-1]]
    partial = write_layout(a_con, tmp_path / "partial", hours=last_day, days=a_days)
    with open_migrated(empty_b) as b:
        con = b.cursor()
        for _ in range(2):  # twice: the daily rows are replaced, not added again
            result = lake.import_layout(con, str(partial), tz="UTC", origin="spark")
            assert (result.hours, result.days) == (24, 2)
            assert_same_tiers(a_con, con, days=a_days, hours=last_day)
            assert not tier_rows(con, "hourly", "values", a_hours[:48])
            assert not tier_rows(con, "hourly_nt", "values", a_hours[:48])
            flags = con.execute(
                "SELECT in_full, in_nt, in_day, source, count(*) FROM rollup_hours "
                "WHERE hour < ? GROUP BY ALL",
                [a_days[-1]],
            ).fetchall()
            assert flags == [(False, False, True, "lake", 48)]
        # Later the hours of those days come too: the days' rows are rebuilt from them,
        # not counted twice.
        full = write_layout(a_con, tmp_path / "full", hours=a_hours, days=a_days)
        result = lake.import_layout(con, str(full), tz="UTC", origin="spark")
        assert (result.hours, result.days, result.skipped_days) == (72, 0, 0)
        assert_same_tiers(a_con, con)
        # And daily rows of days now held at hourly grain are not used over them.
        again = lake.import_layout(con, str(partial), tz="UTC", origin="spark")
        assert (again.days, again.skipped_days) == (0, 2)
        assert_same_tiers(a_con, con)


def test_two_origins_with_other_gateways_for_the_same_hours_coexist(
    a_con, a_hours, a_days, empty_b, tmp_path
):
    eu = write_layout(a_con, tmp_path / "eu", hours=a_hours, days=a_days, gateway="gw-internal")
    us = write_layout(a_con, tmp_path / "us", hours=a_hours, days=a_days, gateway="gw-public")
    with open_migrated(empty_b) as b:
        con = b.cursor()
        assert lake.import_layout(con, str(eu), tz="UTC", origin="eu").gateways == ["gw-internal"]
        assert lake.import_layout(con, str(us), tz="UTC", origin="us").gateways == ["gw-public"]
        assert_same_tiers(a_con, con)
        lake.import_layout(con, str(eu), tz="UTC", origin="eu")  # one region pushes again
        assert_same_tiers(a_con, con)
        origins = con.execute("SELECT DISTINCT origin FROM rollup_hours").fetchall()
        assert origins == [("eu",)]  # the hour's last import


def _spoil(kind: str) -> Callable[[Path], None]:
    """How each refusal case spoils a good layout."""

    def gamma(out):
        edit_manifest(out, "hourly", lambda m: m["constants"].update(gamma=1.03))

    def positions(out):
        edit_manifest(out, "hourly", lambda m: m["constants"].update(position_edges=[1, 2, 4]))

    def version(out):
        edit_manifest(out, "hourly", lambda m: m.update(schema_version=2))

    def not_json(out):
        (out / "hourly" / "_manifest.json").write_text("{'schema_version': 1")

    def counts(out):
        edit_manifest(out, "hourly", lambda m: m["rows"].update(values=m["rows"]["values"] + 1))

    def column(out):
        rewrite_parquet(out, "hourly", "values", "* EXCLUDE (vsum)")

    def float_(out):
        rewrite_parquet(out, "hourly", "gaps", "* REPLACE (vmax::FLOAT AS vmax)")

    def not_parquet(out):
        next((out / "hourly" / "ttft").rglob("*.parquet")).write_text("hour,model\n")

    def half_hour(out):
        rewrite_parquet(out, "hourly", "shapes", "* REPLACE (hour + INTERVAL 30 MINUTE AS hour)")

    def bucket(out):
        rewrite_parquet(out, "hourly", "values", "* REPLACE (40000::INTEGER AS b)")

    def outside(out):
        edit_manifest(out, "hourly", lambda m: m["partitions"].popitem())

    return locals()[kind]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("gamma", "the bucket constant GAMMA is 1.03, tokenshape's is 1.02"),
        ("positions", "the bucket constant POSITION_EDGES is [1, 2, 4]"),
        ("version", "schema_version 2; this tokenshape reads version 1"),
        ("not_json", "hourly/_manifest.json is not JSON"),
        ("counts", "hourly/values: the manifest counts"),
        ("column", "hourly/values: the files have no column 'vsum'"),
        ("float_", "hourly/gaps: column 'vmax' is FLOAT; write it as DOUBLE"),
        ("not_parquet", "is not a Parquet file"),
        ("half_hour", "rows have an hour that is not a whole UTC hour"),
        ("bucket", "rows have b outside -32768 (zero) or -32000..32000"),
        ("outside", "lie outside what the manifest covers"),
    ],
)
def test_a_layout_that_does_not_check_is_refused_whole(
    a_con, a_hours, empty_b, tmp_path, capsys, case, message
):
    out = write_layout(a_con, tmp_path / "lake", hours=a_hours[:48])
    _spoil(case)(out)
    assert lake_cli("import", str(out), "--db", str(empty_b)) == 2
    assert message in capsys.readouterr().err
    with open_migrated(empty_b) as b:
        assert b.cursor().execute("SELECT count(*) FROM rollup_hours").fetchone()[0] == 0


def test_a_remote_path_without_httpfs_says_how_to_install_it(empty_b, capsys):
    con = duckdb.connect()
    installed = con.execute(
        "SELECT installed FROM duckdb_extensions() WHERE extension_name = 'httpfs'"
    ).fetchone()
    assert installed == (False,), "this test is about a machine without httpfs"
    assert lake_cli("import", "s3a://lake/tokenshape/", "--db", str(empty_b)) == 2
    err = capsys.readouterr().err
    assert "reading s3://lake/tokenshape/ needs DuckDB's httpfs extension" in err
    assert 'duckdb -c "INSTALL httpfs"' in err and "PROVIDER credential_chain" in err
    # Nothing was downloaded meanwhile.
    assert con.execute(
        "SELECT installed FROM duckdb_extensions() WHERE extension_name = 'httpfs'"
    ).fetchone() == (False,)


# --- POST /v1/rollups and lake push ------------------------------------------------------------


@pytest.fixture
def central(empty_b: Path) -> Iterator[LiveServer]:
    """A central node (logins off on loopback, as tests run it), its body limit 4 MiB."""
    yield from serve(server_settings(empty_b, max_body_bytes=4 << 20), wait=False)


def test_post_rollups_imports_a_tar_of_the_layout(central, a_con, a_hours, a_days, tmp_path):
    out = write_layout(a_con, tmp_path / "lake", hours=a_hours, days=a_days)
    body = tar_of(out)
    ingest = central.token("ingest", gateway="region-eu")
    tar = {"Content-Type": "application/x-tar"}
    with central.client() as anonymous:
        assert anonymous.post("/v1/rollups", content=body, headers=tar).status_code == 401
        get = anonymous.get("/v1/rollups")
        assert get.status_code == 405 and get.headers["allow"] == "POST"
    with central.client(central.token("read")) as reader:
        refused = reader.post("/v1/rollups", content=body, headers=tar)
        assert refused.status_code == 403 and "ingest" in refused.json()["detail"]
    with central.client(ingest) as client:
        wrong = client.post("/v1/rollups", content=body, headers={"Content-Type": "text/csv"})
        assert wrong.status_code == 415 and "application/x-tar" in wrong.json()["detail"]
        garbage = client.post("/v1/rollups", content=b"not a tar" * 100, headers=tar)
        assert garbage.status_code == 400 and "not an uncompressed tar" in garbage.json()["detail"]
        big = client.post("/v1/rollups", content=b"\0" * (5 << 20), headers=tar)
        assert big.status_code == 413 and "TOKENSHAPE_MAX_BODY_BYTES" in big.json()["detail"]
        spoiled = tmp_path / "spoiled"
        shutil.copytree(out, spoiled)
        edit_manifest(spoiled, "daily", lambda m: m["constants"].update(bucket_limit=30000))
        refused = client.post("/v1/rollups", content=tar_of(spoiled), headers=tar)
        assert refused.status_code == 422
        assert "daily/_manifest.json: the bucket constant BUCKET_LIMIT" in refused.json()["detail"]
        assert central.scalar("SELECT count(*) FROM rollup_hours") == 0
        taken = client.post("/v1/rollups", content=body, headers=tar)
    assert taken.status_code == 200, taken.text
    answer = taken.json()
    assert answer["hours"] == 72 and answer["origin"] == "region-eu"
    assert answer["gateways"] == ["gw-internal", "gw-public"]
    assert (
        answer["rows"]["rollup_values"]
        == a_con.execute("SELECT count(*) FROM rollup_values").fetchone()[0]
    )
    assert_same_tiers(a_con, central.db.cursor())


def test_post_rollups_with_logins_on(secured_template, a_con, a_hours, tmp_path):
    # The auth gate lets the route check its own token, as for the other /v1 routes.
    db = copy_database(secured_template, tmp_path / "s.duckdb")
    settings = Settings(db=db, port=free_port(), auth="on", _env_file=None)
    server = serve(settings, wait=False)
    live = next(server)
    try:
        body = tar_of(write_layout(a_con, tmp_path / "lake", hours=a_hours[:24]))
        with live.client(live.token("ingest", gateway="region-us")) as client:
            taken = client.post(
                "/v1/rollups", content=body, headers={"Content-Type": "application/x-tar"}
            )
        assert taken.status_code == 200, taken.text
        assert taken.json()["hours"] == 24
        with live.login("vic", PASSWORD) as viewer:  # a viewer's session is no ingest token
            assert viewer.post("/v1/rollups", content=body).status_code in (401, 403)
    finally:
        server.close()


def test_lake_push_gives_the_central_node_the_same_tiers(
    central, node_a, a_con, a_hours, tmp_path, capsys
):
    a_path = copy_database(node_a, tmp_path / "a.duckdb")
    token = central.token("ingest", gateway="region-a")
    args = lake_cli_args(
        "push",
        "--db",
        str(a_path),
        "--url",
        central.url,
        "--token",
        token,
        "--origin",
        "region-a",
        "--hours",
        "12",
        "--every",
        "30",
    )
    changed = a_hours[30]

    def between_rounds(seconds: float) -> None:
        # A's hour 30 gets late rows and is rebuilt: only it is pushed again.
        assert seconds == 30
        with open_migrated(a_path) as a:
            con = a.cursor()
            con.execute(
                "INSERT INTO requests SELECT * REPLACE (request_id || '-late' AS request_id) "
                "FROM requests WHERE started_at >= ? AND started_at < ? LIMIT 7",
                [changed, changed + H],
            )
            con.execute("INSERT INTO rollup_dirty VALUES (?, get_current_timestamp())", [changed])
            assert rollups.rebuild_all(con) == 1

    assert lake_sync.push_rounds(args, rounds=2, sleep=between_rounds) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("lake push: 72 hours (2026-11-20 00:00 to 2026-11-23 00:00 UTC)")
    assert "in 6 requests" in lines[0] and "origin 'region-a'" in lines[0]
    assert lines[1].startswith("lake push: 1 hours (2026-11-21 06:00 to 2026-11-21 07:00 UTC)")
    with open_migrated(a_path) as a:
        assert assert_same_tiers(a.cursor(), central.db.cursor()) > 10_000
    origins = (
        central.db.cursor()
        .execute("SELECT source, origin, count(*) FROM rollup_hours GROUP BY ALL")
        .fetchall()
    )
    assert origins == [("lake", "region-a", 72)]


def test_lake_push_says_what_the_central_node_refused(node_a, tmp_path, capsys, central):
    a_path = copy_database(node_a, tmp_path / "a.duckdb")
    read = central.token("read")
    code = lake_cli("push", "--db", str(a_path), "--url", central.url, "--token", read)
    assert code == 1
    assert "403: the token lacks the ingest scope there" in capsys.readouterr().err
    assert central.scalar("SELECT count(*) FROM rollup_hours") == 0


def test_lake_push_halves_a_request_the_central_node_finds_too_big(
    node_a, db_template, tmp_path, capsys
):
    # 100 kB: a day of these rollups is 120-200 kB as a tar, an hour at most 50 kB.
    central_db = copy_database(db_template, tmp_path / "central.duckdb")
    server = serve(server_settings(central_db, max_body_bytes=100_000), wait=False)
    small = next(server)
    try:
        a_path = copy_database(node_a, tmp_path / "a.duckdb")
        token = small.token("ingest")
        assert lake_cli("push", "--db", str(a_path), "--url", small.url, "--token", token) == 0
        line = capsys.readouterr().out
        requests = int(line.split(" in ")[1].split(" requests")[0])
        assert line.startswith("lake push: 72 hours") and requests > 72 // 24
        with open_migrated(a_path) as a:
            assert_same_tiers(a.cursor(), small.db.cursor())
    finally:
        server.close()
