"""The engine a LiteLLM payload names: api_base's host, with or without a scheme."""

from __future__ import annotations

import pytest

from ingest.formats.litellm import PayloadError, _engine


@pytest.mark.parametrize(
    ("api_base", "engine"),
    [
        ("http://vllm-chat:8000/v1", "vllm-chat:8000"),
        ("vllm-chat:8000/v1", "vllm-chat:8000"),  # no scheme: still the host, never a "/"
        ("https://api.example.com", "api.example.com"),
        ("api.example.com", "api.example.com"),
    ],
)
def test_the_engine_is_api_bases_host(api_base, engine):
    assert _engine(api_base) == engine


def test_an_api_base_that_is_not_a_url_is_named():
    with pytest.raises(PayloadError) as caught:
        _engine("http://[::1")
    assert caught.value.field == "api_base"
