"""Synthetic prompts: n words for n tokens, distinct per request, and mended to an exact count
under a tokenizer."""

from __future__ import annotations

import pytest

from app.sizing import prompts


def test_words_for_gives_n_words_deterministically_and_distinct_prompts():
    a = prompts.words_for(0, 500)
    assert len(a.split(" ")) == 500 and set(a.split(" ")) <= set(prompts.WORDS)
    assert prompts.words_for(0, 500) == a
    assert prompts.words_for(1, 500)[:40] != a[:40]  # no shared prefix for the prefix cache
    assert prompts.words_for(0, 500, seed=1) != a
    assert prompts.words_for(3, 0) == ""


def _chars(text: str) -> int:
    """A 'tokenizer' that splits words longer than four letters into two tokens."""
    return sum(1 + (len(w) > 4) for w in text.split())


def test_one_token_words_keeps_only_single_token_words():
    kept = prompts.one_token_words(_chars)
    assert kept and all(len(w) <= 4 for w in kept)


def test_one_token_words_refuses_a_tokenizer_that_splits_everything():
    with pytest.raises(ValueError, match="--format mooncake"):
        prompts.one_token_words(lambda text: 2 * len(text.split()))


def test_exact_prompt_mends_the_count():
    # Every word counts two under this tokenizer: the first draw is twice too long.
    text, ok = prompts.exact_prompt(7, 40, lambda t: 2 * len(t.split()), prompts.WORDS)
    assert ok and 2 * len(text.split()) == 40
    words = prompts.one_token_words(_chars)
    text, ok = prompts.exact_prompt(7, 123, _chars, words)
    assert ok and _chars(text) == 123
