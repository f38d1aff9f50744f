"""The lake push settings (TOKENSHAPE_PUSH_*) in app/config.py: defaults, what is refused and
how it is worded, and the token kept out of every rendering of the settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings

TOKEN = "tks_RegionalPushToken0123456789abcdef"


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


def test_no_push_by_default():
    s = settings()
    assert s.push_url == "" and s.push_token.get_secret_value() == ""
    assert (s.push_every_s, s.push_give_up_s, s.push_origin) == (300.0, 600.0, "")


def test_the_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("TOKENSHAPE_PUSH_URL", " https://central.example:8050 ")
    monkeypatch.setenv("TOKENSHAPE_PUSH_TOKEN", TOKEN)
    monkeypatch.setenv("TOKENSHAPE_PUSH_EVERY_S", "60")
    monkeypatch.setenv("TOKENSHAPE_PUSH_ORIGIN", "eu-west")
    monkeypatch.setenv("TOKENSHAPE_PUSH_GIVE_UP_S", "0")  # 0: retry forever
    s = settings()
    assert s.push_url == "https://central.example:8050"
    assert s.push_token.get_secret_value() == TOKEN
    assert (s.push_every_s, s.push_origin, s.push_give_up_s) == (60.0, "eu-west", 0.0)


def test_a_url_without_a_token_names_both_settings(monkeypatch):
    monkeypatch.setenv("TOKENSHAPE_PUSH_URL", "https://central.example:8050")
    with pytest.raises(ValidationError) as caught:
        settings()
    message = str(caught.value)
    assert "TOKENSHAPE_PUSH_URL is set but TOKENSHAPE_PUSH_TOKEN is empty" in message
    assert "--scope ingest" in message


def test_a_token_alone_is_fine():
    # `tokenshape lake push` takes the token from TOKENSHAPE_PUSH_TOKEN and --url from its line.
    assert settings(push_token=TOKEN).push_url == ""


@pytest.mark.parametrize("url", ["central.example:8050", "ftp://central", "https://", "//host"])
def test_a_url_that_is_no_http_address_is_refused(url):
    with pytest.raises(ValidationError) as caught:
        settings(push_url=url, push_token=TOKEN)
    assert f"{url!r}: use the central node's address with its scheme" in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("push_every_s", 0), ("push_every_s", -5), ("push_every_s", "nan"), ("push_give_up_s", -1)],
)
def test_intervals_out_of_range_are_refused(field, value):
    with pytest.raises(ValidationError) as caught:
        settings(**{field: value})
    assert caught.value.errors()[0]["loc"] == (field,)


def test_the_token_never_shows_in_the_settings_renderings():
    s = settings(push_url="http://127.0.0.1:8050", push_token=TOKEN)
    for text in (repr(s), str(s), s.model_dump_json()):
        assert TOKEN not in text
    assert "push_token=SecretStr('**********')" in repr(s)


def test_a_url_with_a_password_in_it_is_refused():
    # A URL is logged and shown on /api/health: credentials belong in the token setting.
    with pytest.raises(ValidationError, match="TOKENSHAPE_PUSH_TOKEN"):
        Settings(push_url="https://me:hunter2@central.example:8050", push_token="t")
