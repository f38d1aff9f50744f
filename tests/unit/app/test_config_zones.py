"""Time zone settings (app/config): only zones the database can bucket in pass the check."""

from __future__ import annotations

import duckdb
import pytest
from pydantic import ValidationError

from app.config import Settings, zones


def test_every_zone_the_settings_accept_is_one_duckdb_knows():
    known = {
        r[0] for r in duckdb.connect().execute("SELECT name FROM pg_timezone_names()").fetchall()
    }
    assert zones() <= known
    assert {"UTC", "Europe/Berlin", "Australia/Lord_Howe", "America/Sao_Paulo"} <= zones()


@pytest.mark.parametrize(
    "zone", ["localtime", "posixrules", "right/UTC", "posix/Europe/Berlin", "Mars/Base"]
)
def test_a_zone_duckdb_rejects_fails_the_settings_check_naming_it(zone):
    for field in ("tz", "report_tz"):
        with pytest.raises(ValidationError) as err:
            Settings(**{field: zone})
        assert zone in str(err.value) and "IANA" in str(err.value)
