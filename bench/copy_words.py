"""bench_copy.py's `words` task: the induction task made of code words, so that it means the same
copy under any tokenizer (issue 52).

The `induction` task's names are random letters run into random-letter filler: under a BPE
vocabulary a name's tokens merge with the filler after it, so the same name is different tokens
in its two occurrences and no copy by content can be learned from it. Here filler and names are
words of the training repositories' identifiers (`header`, `cache`, `parse`), space-separated,
and each name is 2-3 of them joined snake_case (`cache_header_parse`), as a renamed symbol is:
both occurrences of a name follow a space, so any tokenizer whose pre-tokenizer splits at spaces
(the byte tokenizer; data/tokenizers.py's pattern, which also starts a token at each `_`) writes
them as the same ids. A name's tokens after its first are known only by finding its earlier
occurrence: a copy keyed on the token before them.

    pool = word_pool(training_files())     # data/rename.py; rl/envs/repos/vocabulary.py
    tokens, scored = word_row(tok, rng, pool, filler=24, length=128)
    word_document(rng, pool, filler=24)     # the same row as an SFT chat document
"""

from __future__ import annotations

import numpy as np

NAMES = 4  # names a row copies, as in bench_copy's induction rows


def draw_words(rng, pool: tuple, n: int) -> list[str]:
    """`n` words of `pool` (word_pool), each as likely as its frequency."""
    words, cdf = pool
    return [str(w) for w in words[np.searchsorted(cdf, rng.random(n), side="right")]]


def draw_names(rng, pool: tuple) -> list[str]:
    """NAMES names, each 2-3 words of `pool` joined by `_`."""
    return ["_".join(draw_words(rng, pool, rng.integers(2, 4))) for _ in range(NAMES)]


def word_parts(rng, pool: tuple, filler: int, absent: bool = False) -> tuple[list[str], list[str]]:
    """(context: `filler` words drawn from `pool` (word_pool) with NAMES names at random places,
    names: the same names in a shuffled order). A name is 2-3 drawn words joined by `_`.
    absent: the names after the context are other draws, none of them in the context: the
    control row, where a copy has nothing to find and only the words' own statistics predict."""
    names = draw_names(rng, pool)
    filler_words = draw_words(rng, pool, filler)
    cuts = np.sort(rng.integers(1, filler + 1, size=NAMES))  # a name after a word: after a space
    context = []
    for name, lo, hi in zip(names, np.r_[0, cuts[:-1]], cuts):
        context += filler_words[lo:hi] + [name]
    context += filler_words[cuts[-1] :]
    if absent:
        names = [name for name in draw_names(rng, pool) if name not in names]
    return context, [names[j] for j in rng.permutation(len(names))]


def first_name_token(tok, ids: list) -> int:
    """The index in `ids` (" " + name in `tok`'s ids) of the first token that holds a character
    of the name: 0 under cl100k where its vocabulary merged the space in (` cache`), 1 under the
    `identifiers` pattern, whose space is a token of its own (` `, `cache_`). Which name comes
    next is a guess; what follows is a copy."""
    for index in range(len(ids)):
        if tok.decode(ids[: index + 1]).strip():
            return index
    raise ValueError(f"first_name_token: {ids} decode to blanks")


def word_row(tok, rng, pool: tuple, filler: int, length: int, absent: bool = False) -> tuple:
    """A words row in `tok`'s ids: (tokens [length], scored [length]); scored marks each
    repeated name's tokens after its first (first_name_token; absent: word_parts' control, names
    not repeated).
    Rows over `length` tokens are redrawn; ValueError when 100 draws in a row are."""
    for _ in range(100):
        context, names = word_parts(rng, pool, filler, absent)
        tokens = tok.encode(" ".join(context))
        scored = [0] * len(tokens)
        for name in names:
            ids = tok.encode(" " + name)  # a space starts a token: the context's ids again
            guessed = first_name_token(tok, ids) + 1  # up to the name's first token: a guess
            tokens += ids
            scored += [0] * guessed + [1] * (len(ids) - guessed)
        if len(tokens) <= length:
            pad = tok.encode(" ")[-1:] * (length - len(tokens))
            return np.asarray(tokens + pad), np.asarray(scored + [0] * len(pad))
    raise ValueError(
        f"word_row: 100 rows of {filler} filler words ran over {length} tokens; "
        "fewer --words or a longer --half"
    )


def word_document(rng, pool: tuple, filler: int) -> dict:
    """A words row as an SFT chat document (the trace files' format): the user's message is the
    context, the assistant's the names in their new order, space-separated."""
    context, names = word_parts(rng, pool, filler)
    return {
        "messages": [
            {"role": "user", "content": " ".join(context)},
            {"role": "assistant", "content": " ".join(names)},
        ]
    }
