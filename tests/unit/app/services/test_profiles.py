"""Engine names a profile is saved under, and the error row of an engine that cannot be sized."""

from __future__ import annotations

import pytest

from app.services.profiles import NoProfile, check_name, sizing_failure, stored_build


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
        ("a/b", "holds '/'"),
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
