"""Synthetic prompts of a given token count, for benchmark inputs built from production shapes.

Without a tokenizer a prompt of n tokens is n common English words separated by spaces. Each of
these words, with its leading space, is one token in the byte-level BPE vocabularies of GPT-2,
cl100k, Llama 3 and Qwen, and one piece in SentencePiece vocabularies such as Llama 2's (the
pre-tokeniser splits at every space, so words never merge). The serving engine adds its own
chat template and special tokens on top, as it does for real prompts. With a tokenizer the count
is checked and mended word by word (`exact_prompt`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# Common words, all lower case and ASCII; a prompt draws them at random so that no two prompts
# share a prefix (a repeated prefix would hit the engine's prefix cache, which production
# prompts, in general, do not).
WORDS: tuple[str, ...] = tuple(
    """the of and to in is that for it as was with be by on not he this are or his from at
    which but have an they you were her she there one all we their has been would when who
    will more no if out so said what up its about into than them can only other new some could
    time these two may then do first any my now such like our over man me even most made after
    also did many before must through back years where much your way well down should because
    each just those people how too little state good very make world still own see men work
    long get here between both life being under never day same another know while last might
    us great old year off come since against go came right used take three""".split()
)

Encoder = Callable[[str], int]  # text → its token count (no special tokens)


def words_for(index: int, n_tokens: int, seed: int = 0, words: Sequence[str] = WORDS) -> str:
    """The prompt of request `index`: n_tokens words drawn from `words` (deterministic)."""
    if n_tokens <= 0:
        return ""
    rng = np.random.default_rng((seed, index))
    picks = rng.integers(0, len(words), size=n_tokens)
    table = np.asarray(words, dtype=object)
    return " ".join(table[picks].tolist())


def one_token_words(count: Encoder, words: Sequence[str] = WORDS) -> tuple[str, ...]:
    """The words a tokenizer encodes as one token both alone and after a space."""
    kept = tuple(w for w in words if count(w) == 1 and count(f"a {w}") == count("a") + 1)
    if len(kept) < 16:
        raise ValueError(
            "the tokenizer splits common English words into several tokens, so prompts of an "
            "exact length cannot be built from them; export --format mooncake instead (the "
            "benchmark then makes its own prompts with its tokenizer)"
        )
    return kept


def exact_prompt(
    index: int, n_tokens: int, count: Encoder, words: Sequence[str], seed: int = 0
) -> tuple[str, bool]:
    """A prompt `count` encodes as exactly n_tokens tokens, and whether that was reached
    (words are added or dropped by the measured tokens per word, at most 12 times)."""
    parts = words_for(index, n_tokens, seed, words).split(" ") if n_tokens > 0 else []
    for step in range(12):
        got = count(" ".join(parts)) if parts else 0
        if got == n_tokens:
            return " ".join(parts), True
        per_word = got / len(parts) if parts else 1.0
        change = round((n_tokens - got) / per_word) or (1 if n_tokens > got else -1)
        if change > 0:
            parts += [words[(index + step + k) % len(words)] for k in range(change)]
        else:
            del parts[max(len(parts) + change, 0) :]
    return " ".join(parts), False
