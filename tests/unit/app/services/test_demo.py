"""The demo at production volume: a sampled log of a platform whose engines run near their
capacity, with latencies from the performance model at the load each request met."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from app.services import demo, demo_physics
from app.sizing.profile import EngineProfile
from app.storage.schema import REQUESTS_SCHEMA

END = datetime(2026, 11, 23, tzinfo=UTC)
DAYS = 14
# A 0.1% sample of the platform's two weeks: ~32,000 rows at its full volume, cheap to make.
THIN = 0.001


@pytest.fixture(scope="module")
def thin() -> pa.Table:
    """Two weeks of the platform at its design volume, kept at 0.1%."""
    rows, rate, scale = demo.plan(round(demo.design_requests() * THIN), THIN, DAYS, "UTC")
    assert scale == pytest.approx(1.0, rel=1e-3)
    return demo.generate(rows, days=DAYS, end=END, sample_rate=rate, scale=scale, total=rows)


def _frame(table: pa.Table) -> pd.DataFrame:
    df = table.select(
        ["engine", "started_at", "ttft_ms", "itl_ms", "queue_ms", "status", "sample_rate"]
    ).to_pandas()
    df["hour"] = df.started_at.dt.floor("h")
    return df


def test_the_default_demo_is_a_one_percent_sample_of_at_most_500k_rows() -> None:
    rows, rate, scale = demo.plan(None, None, DAYS, "UTC")
    assert rate == demo.DEFAULT_SAMPLE_RATE == 0.01
    assert scale == 1.0
    assert 200_000 <= rows <= 500_000
    assert rows == demo.default_rows()
    # The rows stand for the platform's true traffic: tens of millions of requests.
    assert rows / rate == pytest.approx(demo.design_requests(), rel=1e-4)


def test_requests_sets_the_rows_and_defaults_to_unsampled() -> None:
    rows, rate, scale = demo.plan(3000, None, DAYS, "UTC")
    assert (rows, rate) == (3000, 1.0)
    assert scale == pytest.approx(3000 / demo.design_requests())
    rows, rate, scale = demo.plan(3000, 0.001, DAYS, "UTC")
    assert scale == pytest.approx(3_000_000 / demo.design_requests())
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="sample_rate"):
            demo.plan(None, bad, DAYS, "UTC")
    with pytest.raises(ValueError, match="requests"):
        demo.plan(0, None, DAYS, "UTC")


def test_every_row_carries_its_sample_rate(thin: pa.Table) -> None:
    assert thin.schema == REQUESTS_SCHEMA
    rates = thin.column("sample_rate").to_numpy()
    assert (rates == THIN).all()


def test_the_chat_engine_peaks_at_30_to_60_true_requests_per_second(thin: pa.Table) -> None:
    df = _frame(thin)
    chat = df[(df.engine == "chat-8b") & (df.started_at.dt.day_of_week < 5)]
    # Weighted (each row stands for 1/p requests): the true rate per hour of a weekday.
    days = chat.started_at.dt.date.nunique()
    by_hour = (1 / chat.sample_rate).groupby(chat.started_at.dt.hour).sum() / days / 3600
    assert 30 <= by_hour.max() <= 60
    assert by_hour.min() < 5  # and quiet at night
    # The design says the same without sampling noise.
    design = demo.hourly_rates(DAYS, "UTC", END)
    on_chat = [k for k, w in enumerate(demo.WORKLOADS) if w.engine == "chat-8b"]
    assert 30 <= design[:, on_chat].sum(axis=1).max() <= 60


def test_the_fleet_is_four_engines_on_14_to_24_gpus_with_slos_and_prices() -> None:
    gpus = 0
    assert len(demo.DEMO_PROFILES) >= 4
    for name, fields in demo.DEMO_PROFILES.items():
        profile = EngineProfile(**fields)
        assert profile.replicas and profile.slo_ttft_ms and profile.slo_itl_ms, name
        assert profile.slo_percentile and profile.cost_per_gpu_hour, name
        gpus += profile.replicas * profile.gpus
    assert 14 <= gpus <= 24
    assert {w.engine for w in demo.WORKLOADS} == set(demo.DEMO_PROFILES)


def test_the_same_seed_gives_the_same_rows() -> None:
    def rows(seed: int) -> pa.Table:
        return demo.generate(2000, days=DAYS, seed=seed, end=END, sample_rate=THIN)

    assert rows(3).equals(rows(3))
    assert not rows(3).equals(rows(4))


def test_itl_rises_with_the_requests_running() -> None:
    for name, profile in demo.DEMO_PROFILES.items():
        ph = demo_physics.physics(profile)
        running = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256], dtype=float)
        for isl, osl in ((300, 20), (1500, 250), (6000, 600)):
            itl = ph.itl_ms(np.full(9, isl), np.full(9, osl), running)
            assert (np.diff(itl) >= -1e-9).all(), (name, isl, osl, itl)


def _hours(engine: str, *, busiest: bool) -> pd.DatetimeIndex:
    """The 20 busiest (or quietest) hours of an engine's design."""
    starts = demo._hour_grid(END - timedelta(days=DAYS), DAYS, "UTC")[0]
    ks = [k for k, w in enumerate(demo.WORKLOADS) if w.engine == engine]
    order = np.argsort(demo.hourly_rates(DAYS, "UTC", END)[:, ks].sum(axis=1))
    return pd.to_datetime(starts[order[-20:] if busiest else order[:20]], unit="us", utc=True)


def test_itl_is_higher_in_the_busy_hours_than_the_quiet_ones(thin: pa.Table) -> None:
    chat = _frame(thin).query("engine == 'chat-8b'")
    high = chat[chat.hour.isin(_hours("chat-8b", busiest=True))].itl_ms.median()
    low = chat[chat.hour.isin(_hours("chat-8b", busiest=False))].itl_ms.median()
    assert high > 1.5 * low


def test_only_the_under_provisioned_chat_engine_misses_its_slo_at_peak(thin: pa.Table) -> None:
    df = _frame(thin)
    for name, profile in demo.DEMO_PROFILES.items():
        eng = df[(df.engine == name) & (df.status == "ok")]
        by_hour = eng.groupby("hour")
        ttft = by_hour.ttft_ms.quantile(0.95)
        worst = ttft.idxmax()
        if name == "chat-8b":
            # Its replicas are full at the office peak: the queue grows, and TTFT is the wait
            # for a slot, far above the ~20 ms prefill of a chat prompt.
            assert ttft.max() > 20 * profile["slo_ttft_ms"]
            peak = eng[eng.hour == worst]
            assert peak.queue_ms.median() > 0.9 * peak.ttft_ms.median()
            assert ttft.min() < profile["slo_ttft_ms"]  # the nights are fine
        else:
            p95 = eng.ttft_ms.quantile(0.95), eng.itl_ms.quantile(0.95)
            assert p95[0] <= profile["slo_ttft_ms"], (name, p95)
            assert p95[1] <= profile["slo_itl_ms"], (name, p95)


def test_the_night_batch_needs_a_longer_max_seq_len_than_the_day(thin: pa.Table) -> None:
    df = thin.select(["engine", "started_at", "isl", "osl"]).to_pandas()
    big = df[df.engine == "llm-70b"]
    hour = big.started_at.dt.hour
    seq = big.isl + big.osl
    night, day = seq[(hour >= 22) | (hour < 6)], seq[(hour >= 9) & (hour < 18)]
    assert night.quantile(0.999) > 3 * day.quantile(0.999)
