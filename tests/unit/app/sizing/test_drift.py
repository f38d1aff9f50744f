"""Drift findings (app/sizing/drift): severity rules on hand-made numbers."""

from __future__ import annotations

import pytest

from app.sizing.drift import Finding, findings, share_text

WEEK_S = 7 * 24 * 3600


def week(requests: int = 1000, **values: float | None) -> dict:
    """A week of statistics that drifts nowhere unless told."""
    base = {
        "requests": requests,
        "isl_p99": 1000.0,
        "osl_p99": 200.0,
        "isl_p999": 3000.0,
        "seq_p999": 6000.0,
        "ttft_p95": 100.0,
        "arrival_rate": requests / WEEK_S,
    }
    return base | values


def run(
    last: dict | None = None,
    previous: dict | None = None,
    counts: tuple = (0, 0, 1000),
    bounds: tuple = (4096, 8192),
) -> list[Finding]:
    weeks = {"last": last or week(), "previous": previous or week()}
    return findings("e", bounds, weeks, counts)


def kinds(fs: list[Finding]) -> dict[str, str]:
    return {f.kind: f.severity for f in fs}


# --- severity rules, hand-made numbers -------------------------------------------------------


def test_steady_traffic_has_no_findings():
    assert run() == []


@pytest.mark.parametrize(
    ("n", "severity"),
    [(0, None), (1, "info"), (9, "info"), (10, "warning"), (99, "warning"), (100, "critical")],
)
def test_beyond_bounds_share_boundaries(n, severity):
    # out of 10,000: 10 is exactly 0.1%, 100 exactly 1%
    fs = run(counts=(n, n, 10_000))
    assert kinds(fs).get("beyond_input") == severity
    assert kinds(fs).get("beyond_seq") == severity
    if n:
        f = next(f for f in fs if f.kind == "beyond_input")
        assert f.value == pytest.approx(n / 10_000)
        assert f"({n:,} of 10,000)" in f.message and "max_input_len 4,096" in f.message


def test_beyond_message_reads_as_a_sentence():
    (f,) = run(counts=(20, 0, 1000))
    assert f.severity == "critical" and f.value == pytest.approx(0.02)
    assert f.message == (
        "2.0% of last week's requests (20 of 1,000) were longer than max_input_len 4,096: "
        "they fail or are truncated today"
    )


def test_share_text_never_overstates():
    assert share_text(20, 1000) == "2.0%"
    assert share_text(999, 100_000) == "0.9%"  # 0.999% shown as 0.9%, not 1.0%
    assert share_text(1, 100_000) == "0.001%"
    assert share_text(0, 10) == "0.0%"


def test_unset_bounds_are_skipped():
    fs = run(counts=(None, None, 1000), bounds=(None, None), last=week(isl_p999=10.0))
    assert fs == []


@pytest.mark.parametrize(
    ("p999", "severity"),
    [(1024.0, "critical"), (1025.0, "warning"), (2048.0, "warning"), (2049.0, None)],
)
def test_over_provisioning_boundaries(p999, severity):
    # max_input_len 4,096: ratio 4 at 1,024, ratio 2 at 2,048
    fs = run(last=week(isl_p999=p999))
    assert kinds(fs).get("over_provisioned_input") == severity
    if severity:
        f = next(f for f in fs if f.kind == "over_provisioned_input")
        assert f.value == pytest.approx(4096 / p999)
        assert "over-provisioned" in f.message and "max_input_len 4,096" in f.message


def test_over_provisioning_of_max_seq_len_and_empty_prompts():
    fs = run(last=week(seq_p999=2048.0, isl_p999=0.0))
    assert kinds(fs) == {"over_provisioned_input": "critical", "over_provisioned_seq": "critical"}
    # a p99.9 of zero tokens counts as one, so the ratio stays finite
    assert next(f for f in fs if f.kind == "over_provisioned_input").value == 4096.0


def test_a_bound_below_the_p999_is_not_over_provisioned():
    fs = run(last=week(isl_p999=5000.0), counts=(20, 0, 1000))
    assert kinds(fs) == {"beyond_input": "critical"}


@pytest.mark.parametrize(
    ("before", "now", "severity"),
    [
        (1000.0, 1500.0, "warning"),
        (1000.0, 1490.0, "info"),
        (1000.0, 1200.0, "info"),
        (1000.0, 1190.0, None),
        (1000.0, 500.0, "warning"),
        (1000.0, 800.0, "info"),
        (1000.0, 810.0, None),
    ],
)
def test_week_over_week_boundaries(before, now, severity):
    fs = run(last=week(isl_p99=now), previous=week(isl_p99=before))
    assert kinds(fs).get("change_isl_p99") == severity
    if severity:
        f = next(f for f in fs if f.kind == "change_isl_p99")
        assert f.value == pytest.approx((now - before) / before)
        verb = "rose" if now > before else "fell"
        assert f.message.startswith(f"p99 ISL {verb} ")
        assert f"from {before:,.0f} tokens to {now:,.0f} tokens" in f.message


def test_every_week_over_week_metric():
    fs = run(
        last=week(osl_p99=300.0, arrival_rate=0.004, ttft_p95=125.0),
        previous=week(osl_p99=200.0, arrival_rate=0.002, ttft_p95=100.0),
    )
    assert kinds(fs) == {
        "change_osl_p99": "warning",
        "change_arrival_rate": "warning",
        "change_ttft_p95": "info",
    }
    assert "from 0.002 requests/s to 0.004 requests/s" in fs[1].message


def test_ttft_only_counts_when_it_gets_slower():
    fs = run(last=week(ttft_p95=40.0), previous=week(ttft_p95=100.0))
    assert fs == []
    fs = run(last=week(ttft_p95=None), previous=week(ttft_p95=100.0))
    assert fs == []


def test_week_over_week_needs_100_requests_in_both_weeks():
    grown = {"isl_p99": 5000.0}
    assert run(last=week(100, **grown), previous=week(99)) == []
    assert run(last=week(99, **grown), previous=week(100)) == []
    assert kinds(run(last=week(100, **grown), previous=week(100))) == {"change_isl_p99": "warning"}


def test_no_data_last_week_is_one_info_finding():
    fs = run(last=week(0, isl_p999=None), previous=week(), counts=(0, 0, 0))
    assert fs == [Finding("e", "no_data", "info", "no requests in the last 7 days", 0.0)]


def test_findings_are_sorted_by_severity():
    fs = run(
        last=week(isl_p99=1300.0, osl_p99=400.0, isl_p999=1500.0),
        previous=week(isl_p99=1000.0, osl_p99=200.0),
        counts=(50, 0, 1000),
    )
    assert [f.severity for f in fs] == ["critical", "warning", "warning", "info"]
    assert [f.kind for f in fs] == [
        "beyond_input",
        "over_provisioned_input",
        "change_osl_p99",
        "change_isl_p99",
    ]
