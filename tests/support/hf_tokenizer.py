"""A word-level tokenizer built offline and laid out as a cached Hugging Face hub model, so a tool
that loads tokenizers through transformers (AIPerf) finds it with HF_HUB_OFFLINE=1.

No installed package ships a tokenizer.json (neither this venv nor AIPerf's), and nothing can be
fetched from a hub here, so the tokenizer is trained in the test with the `tokenizers` package
(the project's `tokenizer` extra). It is word-level on purpose: every word and punctuation run of
its corpus is one token, and decoding joins tokens with spaces, so decode then encode gives the
same tokens back. AIPerf builds a prompt of N tokens by decoding N corpus tokens and re-encoding
until the count is N, and counts the output by encoding the streamed text joined, so with this
tokenizer both come out exact, with no retries and no drift at the seams.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

UNK = "[UNK]"


def train(corpus: Iterable[Path], words: Iterable[str] = ()) -> Tokenizer:
    """A WordLevel tokenizer over the words of the corpus files, plus `words`, each one token."""
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    # Whitespace splits on \w+ and runs of other non-space characters, so any text of corpus
    # words re-tokenizes to the same pieces however it was spaced.
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    # No limit on the vocabulary and no minimum count: every piece of the corpus gets an id, so
    # a prompt cut from it never holds [UNK]. [UNK] is a special token all the same: decoded it
    # reads "[UNK]", which encodes back to the one token, so the round trip holds even then.
    trainer = trainers.WordLevelTrainer(
        vocab_size=10_000_000, min_frequency=0, special_tokens=[UNK]
    )
    tok.train([str(p) for p in corpus], trainer)
    tok.add_tokens([w for w in words if tok.token_to_id(w) is None])
    return tok


def install(tok: Tokenizer, hf_home: Path, repo_id: str) -> Path:
    """Lay `tok` out as the hub cache holds a downloaded model (HF_HOME/hub/models--ORG--NAME:
    snapshots/<revision>/ and refs/main naming it); returns the snapshot folder."""
    org, name = repo_id.split("/")
    body = tok.to_str()
    revision = hashlib.sha1(body.encode()).hexdigest()
    model = hf_home / "hub" / f"models--{org}--{name}"
    snapshot = model / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "tokenizer.json").write_text(body, encoding="utf-8")
    # A tokenizer-only repository: transformers builds PreTrainedTokenizerFast from
    # tokenizer.json. Clean-up off, so decoding never glues punctuation to a word (it would still
    # re-tokenize the same, but the text would differ from the plain join).
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": UNK,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000,
    }
    (snapshot / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    # An empty config.json, as AIPerf writes for tokenizer-only repositories itself: offline,
    # transformers looks for one before it reads tokenizer_config.json.
    (snapshot / "config.json").write_text("{}", encoding="utf-8")
    (model / "refs").mkdir(exist_ok=True)
    (model / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot
