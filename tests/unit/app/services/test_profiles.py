"""Engine names a profile is saved under, and the error row of an engine that cannot be sized."""

from __future__ import annotations

import math

import duckdb
import pytest

from app.services.profiles import (
    NoProfile,
    check_name,
    profile_caused,
    sizing_failure,
    stored_build,
)


@pytest.mark.parametrize(
    "name", ["chat-8b", "api.example.com", "gw:llama-3.1-8b", "a..b", "x" * 256, "é-moteur"]
)
def test_engine_names_as_ingest_sends_them_are_accepted(name):
    check_name(name)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("x" * 257, "257 characters; at most 256"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        (".", "is not a name"),
        ("..", "is not a name"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_bad_engine_names_are_refused_with_the_rule(name, words):
    with pytest.raises(ValueError, match="^engine name: ") as caught:
        check_name(name)
    assert words in str(caught.value)


def test_a_name_with_a_slash_is_refused_saying_what_to_do():
    with pytest.raises(ValueError) as caught:
        check_name("vllm-chat:8000/v1")
    assert str(caught.value) == (
        "engine name 'vllm-chat:8000/v1' holds '/': a profile cannot be saved for it; rename "
        "the engine where its requests are sent (for LiteLLM, give api_base a scheme: "
        "http://host:port/v1)"
    )


def test_a_failure_is_an_error_row_logged_once(caplog):
    with caplog.at_level("WARNING", logger="tokenshape.profiles"):
        rows = [sizing_failure("llm-x", OverflowError("math range error")) for _ in range(3)]
    assert rows[0] == (
        "llm-x: could not be sized (OverflowError: math range error); fix its profile on the "
        "Rightsizing page"
    )
    assert len(set(rows)) == 1
    assert [r.getMessage() for r in caplog.records].count(
        "engine 'llm-x' could not be sized: OverflowError: math range error"
    ) == 1
    stale = NoProfile("engine 'e' has a stored profile that is no longer valid (…); save it again")
    assert sizing_failure("e", stale) == str(stale)


def test_a_stored_profile_is_described_whatever_it_holds():
    assert stored_build({"model": "llama-3.1-70b", "gpu": "H100", "tensor_parallel": 4}) == (
        "llama-3.1-70b",
        "4× H100",
    )
    assert (
        stored_build({"model": ["x"], "gpu": "H100", "tensor_parallel": {"x": 1}})[1] == "?× H100"
    )
    assert stored_build({})[1] == "1× "


def _raised(call) -> BaseException:
    """The exception a real call raises (so its traceback is the real one)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - any kind is what is under test
        return exc
    raise AssertionError("it did not raise")


def _profile_errors() -> list[BaseException]:
    from app.services.perfmodel import PerfModelError
    from app.sizing.deploy import schedule_runs
    from app.sizing.profile import EngineProfile

    def perf_model():
        raise PerfModelError("no performance database for h100_sxm")

    return [
        NoProfile("engine 'e' has no profile"),
        _raised(lambda: math.exp(1e308)),  # OverflowError
        _raised(lambda: EngineProfile.model_validate({"model": 1})),  # pydantic
        _raised(perf_model),
        _raised(lambda: schedule_runs([1] * 3)),  # ValueError inside app/sizing
    ]


def _other_errors() -> list[BaseException]:
    con = duckdb.connect()
    return [
        _raised(lambda: con.execute("SELECT * FROM no_such_table")),  # a database error
        _raised(lambda: int("not a number")),  # a ValueError outside app/sizing: a bug
        _raised(lambda: {}["key"]),
        _raised(lambda: None.attribute),  # type: ignore[attr-defined]
    ]


def test_only_what_a_profile_causes_says_fix_its_profile():
    for exc in _profile_errors():
        assert profile_caused(exc), repr(exc)
        assert "could not be computed" not in sizing_failure("e-profile", exc), repr(exc)
    for exc in _other_errors():
        assert not profile_caused(exc), repr(exc)
        row = sizing_failure("e-other", exc)
        assert row.startswith(f"e-other: could not be computed ({type(exc).__name__}")
        assert row.endswith("); see the server log") and "profile" not in row


def test_other_failures_are_logged_with_their_traceback_once_per_engine_and_kind(caplog):
    exc = _other_errors()[0]
    with caplog.at_level("WARNING", logger="tokenshape.profiles"):
        for _ in range(3):
            sizing_failure("e-logged", exc)
        sizing_failure("e-logged", _other_errors()[0])  # the same kind again: not logged
        sizing_failure("e-logged", _other_errors()[1])  # another kind: logged
    records = [r for r in caplog.records if "'e-logged'" in r.getMessage()]
    assert len(records) == 2
    assert records[0].exc_info is not None and records[0].exc_info[1] is exc
    assert "could not be computed" in records[0].getMessage()
