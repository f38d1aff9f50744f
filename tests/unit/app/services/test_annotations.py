"""Annotations and profile history through the services (app/services/annotations, profiles):
the change in words, the authors, the rules a note's text and time keep, one merged list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.auth import principal
from app.auth.principal import Principal
from app.services import annotations, profiles
from tests.support.database import copy_database, open_migrated

T0 = datetime(2026, 11, 20, 8, tzinfo=UTC)
PROFILE = {"model": "llama-3.1-8b", "gpu": "H100", "max_input_len": 4096}


@pytest.fixture
def db(db_template, tmp_path):
    with open_migrated(copy_database(db_template, tmp_path / "a.duckdb")) as opened:
        yield opened


def test_a_change_in_words():
    before = {"max_input_len": 4096, "gpu": "H100", "slo_e2e_ms": 2000.0, "hf_config": "x" * 99}
    after = {"max_input_len": 8192, "gpu": "L40S", "slo_ttft_ms": 500.0, "hf_config": "y" * 99}
    assert profiles.change_words(before, after) == (
        "gpu H100 → L40S; hf_config changed; max_input_len 4,096 → 8,192; slo_e2e_ms 2,000 "
        "removed; slo_ttft_ms set to 500"
    )
    assert profiles.change_words(None, PROFILE) == "created: llama-3.1-8b on 1× H100"
    assert profiles.change_words(PROFILE, None) == "deleted (was llama-3.1-8b on 1× H100)"
    many = {f"f{k}": k for k in range(12)}
    assert profiles.change_words({}, many).endswith("; and 4 more")


def test_authors_follow_the_caller():
    assert profiles.current_author() == "cli"  # no request: the command line
    for who, words in [
        (Principal("ada", "admin", "session"), "ada"),
        (Principal("everyone", "admin", "open"), "open mode"),
    ]:
        token = principal.set_current(who)
        try:
            assert profiles.current_author() == words
        finally:
            principal.reset(token)
    assert profiles.token_author("gw-test", "AbCd1234") == "token gw-test/AbCd1234"


def test_saves_deletes_and_restores_are_history(db):
    profiles.save_profile(db, "e", PROFILE, None, T0)
    profiles.save_profile(db, "e", {"max_input_len": 8192}, None, T0, merge=True, author="ada")
    assert profiles.delete_profile(db, "e", T0 + timedelta(minutes=1), "bob")
    assert not profiles.delete_profile(db, "e", T0)
    back = profiles.restore_profile(db, "e", T0 + timedelta(minutes=2), "cy")
    assert back.summary == "restored the profile deleted 2026-11-20 08:01 UTC by bob"
    assert profiles.stored_profile(db, "e")["max_input_len"] == 8192
    got = [(v.action, v.author, v.summary) for v in profiles.history(db, "e")]
    assert got[1:] == [
        ("delete", "bob", "deleted (was llama-3.1-8b on 1× H100)"),
        ("edit", "ada", "max_input_len 4,096 → 8,192"),
        ("create", "cli", "created: llama-3.1-8b on 1× H100"),
    ]
    with pytest.raises(profiles.RestoreConflict, match="has a newer profile .restored 2026"):
        profiles.restore_profile(db, "e", T0, "cy")
    with pytest.raises(profiles.NoDeletedProfile, match="no recorded changes"):
        profiles.restore_profile(db, "other", T0, "cy")
    # A refused edit records nothing.
    with pytest.raises(ValueError, match="gpu"):
        profiles.save_profile(db, "e", {"gpu": "H1000"}, None, T0, merge=True)
    assert len(profiles.history(db, "e")) == 4


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "text: empty"),
        ("   ", "text: empty"),
        ("x" * 501, "text: 501 characters; at most 500"),
        ("two\nlines", "control character"),
    ],
)
def test_a_note_text_is_one_line_of_at_most_500_characters(db, text, problem):
    with pytest.raises(ValueError, match=problem):
        annotations.add_note(db, text, T0)


def test_a_note_time_and_engine_are_checked(db):
    with pytest.raises(ValueError, match="at: 2300-01-01T00:00:00\\+00:00 is outside"):
        annotations.add_note(db, "x", T0, at=datetime(2300, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="engine .* holds '/'"):
        annotations.add_note(db, "x", T0, engine="host:8000/v1")
    with pytest.raises(ValueError, match="when: 'soon' is not an ISO 8601 time"):
        annotations.parse_time("when", "soon")
    naive = annotations.parse_time("at", "2026-11-20T09:00")
    assert naive == T0 + timedelta(hours=1)  # no zone: UTC


def test_notes_and_changes_in_one_list(db):
    profiles.save_profile(db, "e", PROFILE, None, T0 + timedelta(hours=2), author="ada")
    note = annotations.add_note(db, "  deployed vLLM 0.33 ", T0, engine="e", author="bob")
    fleet = annotations.add_note(db, "<b>holiday</b>", T0, at=T0 + timedelta(hours=3))
    assert note.text == "deployed vLLM 0.33" and note.at == T0 and fleet.author == "cli"
    start, end = annotations.window(None, None, T0)
    assert (start, end) == (T0 - annotations.DEFAULT_SPAN, None)
    found = annotations.between(db, start, end)
    assert [(a.kind, a.text) for a in found] == [
        ("note", "deployed vLLM 0.33"),
        ("profile", "e: created: llama-3.1-8b on 1× H100"),
        ("note", "<b>holiday</b>"),  # stored as typed: escaping is the renderer's job
    ]
    assert found[1].as_dict()["id"] == "profile:e:1" and not found[1].as_dict()["deletable"]
    assert found[0].as_dict()["at"] == "2026-11-20T08:00:00Z"
    assert [a.text for a in annotations.between(db, T0 + timedelta(hours=1), None, "x")] == [
        "<b>holiday</b>"
    ]
    with pytest.raises(ValueError, match="start: must be before end"):
        annotations.window(T0, T0, T0)
    assert annotations.delete_note(db, note.id) and not annotations.delete_note(db, note.id)
