"""Byte-level BPE vocabularies learned from code (issue 52's tokenizer arm).

Why: a policy must copy the statement's symbol into its calls, and under the byte tokenizer a
copy keyed on the last byte writes only ~0.2 of a fresh name's bytes (bench/bench_copy.py's
yardstick); names need a key of 2-3 bytes, which no model here formed. With a vocabulary learned
from the repositories a name is a few tokens and a copy keyed on one token writes most of it,
and an episode is ~4x fewer tokens, so more of it fits the context.

Which texts it learns from is the caller's choice: rl/envs/repos/vocabulary.py gives it the
training repositories only (`python -m rl.envs.repos.vocabulary --vocab_size 4096 --out PATH`).
Pre-tokenization (`pattern`): PATTERNS["cl100k"] is data/tokenizers.py's DEFAULT_PAT_STR (a word
keeps one leading non-letter: ` name`, `(name`, `` `name ``, `_name`), PATTERNS["identifiers"]
cuts an identifier whole from whatever precedes it. Under cl100k a name is different tokens where
the statement backticks it (`` `singularize` ``) and where a call writes it (`def singularize`):
on the name-copy probe's 63 naming prefixes the name's first token differs in 45 of the trained
names and 36 of the fresh ones, so the copy a policy needs there is not a copy of ids. Under
"identifiers" an identifier is the same ids wherever it appears (a space is then a token of its
own: more tokens a byte). Then GPT-2's byte alphabet; SPECIAL_TOKENS take ids 0.. in their order,
so the file loads with `load_tokenizer("hf:PATH")`. The trainer is deterministic: the same texts
in the same order and size give the same file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence

from data.tokenizers import DEFAULT_PAT_STR

# identifiers: a run of letters, digits and `_` that starts with a letter or `_` is one
# pre-token and takes no leading space or punctuation; punctuation runs (a leading space allowed)
# and whitespace runs are the rest, digits outside identifiers in threes as in cl100k.
IDENTIFIER_PAT_STR = (
    r"""[\p{L}_][\p{L}\p{N}_]*|\p{N}{1,3}| ?[^\s\p{L}\p{N}_]+[\r\n]*|\s*[\r\n]+|\s+"""
)
PATTERNS = {"cl100k": DEFAULT_PAT_STR, "identifiers": IDENTIFIER_PAT_STR}


def pattern_str(pattern: str) -> str:
    """The pre-tokenizer regex of a PATTERNS name; ValueError names the choices."""
    if pattern not in PATTERNS:
        raise ValueError(f"code BPE pattern {pattern!r}: one of {sorted(PATTERNS)}")
    return PATTERNS[pattern]


def corpus(files: Sequence[str], traces: str = "") -> Iterator[str]:
    """Each file's text, then each message of the chat traces in `traces` (JSONL with
    "messages"; '' = none): its content and its tool calls as the chat renders them (JSON)."""
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield f.read()
    if not traces:
        return
    with open(traces, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                for m in json.loads(line)["messages"]:
                    yield m.get("content", "") + json.dumps(m.get("tool_calls") or [])


def train_bpe(texts: Iterable[str], vocab_size: int, out: str, pattern: str = "cl100k") -> str:
    """Trains a vocabulary of `vocab_size` ids on `texts` with the pre-tokenizer `pattern` (the
    module docstring's) and writes its tokenizer.json to `out` (whole or not at all); -> `out`."""
    from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HFTok

    from data.tokenizers import SPECIAL_TOKENS, special_text

    regex = pattern_str(pattern)
    floor = 256 + len(SPECIAL_TOKENS)
    if vocab_size < floor:
        raise ValueError(f"code BPE vocab_size {vocab_size}: at least {floor} (bytes + specials)")
    tok = HFTok(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[special_text(n) for n in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tok.save(out + ".tmp")
    os.replace(out + ".tmp", out)
    return out
