"""The token bucket (app/server/ratelimit): refill, debt, a clock stepping back."""

from __future__ import annotations

import pytest

from app.server.ratelimit import Bucket


def test_a_bucket_refills_at_its_rate_and_lets_an_oversized_take_through_in_debt():
    b = Bucket(rate=10, burst=100, level=100, updated=0.0)
    assert b.take(100, 0.0) == 0.0
    assert b.take(50, 0.0) == pytest.approx(5.0)  # 50 missing at 10/s
    assert b.take(50, 4.0) == pytest.approx(1.0)  # refused takes take nothing
    assert b.take(50, 5.0) == 0.0
    assert b.take(250, 5.0) == pytest.approx(10.0)  # bigger than the bucket: wait until full
    assert b.take(250, 15.0) == 0.0 and b.level == pytest.approx(-150)  # ...then in debt
    assert b.take(1, 29.0) == pytest.approx(1.1)  # the debt (-10 by now) is paid first
    assert b.take(1, 10.0) > 0  # a clock stepping back neither refills nor crashes
