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
    word_row(tok, rng, pool, 24, 128, ask="marked")  # a mention row: one name marked, asked for

The `mention` rows add what a words row cannot ask: a name's first token. A statement marks its
symbol in backticks among other identifiers, and the expert's first search names it
(rl/envs/repos/expert.py: "Searching for the definition of NAME."): which name comes next is
known there only through the mark. A mention row is a words row whose context writes one of its
names in backticks and which ends in the expert's words (QUERY) and the marked name, every
token of it scored: its first through the mark (a pointer), the rest by a copy. Its control
writes no mark: there a model that copies names but reads no mark guesses the first token among
the row's NAMES names.
"""

from __future__ import annotations

import numpy as np

NAMES = 4  # names a row copies, as in bench_copy's induction rows
QUERY = " Searching for the definition of"  # the expert's words before its first search, then
# " " + the name (rl/envs/repos/expert.py)
POINTED = 2  # `scored` value of a mention row's asked-for first token (a copy's is 1)


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


def mark(context: list[str], name: str) -> list[str]:
    """`context` with the first occurrence of `name` in backticks, as a statement marks its
    symbol."""
    at = context.index(name)
    return context[:at] + [f"`{name}`"] + context[at + 1 :]


def word_ids(tok, rng, pool: tuple, filler: int, absent: bool, ask) -> tuple[list, list]:
    """One words row's (ids, scored) before padding; `ask` (mention rows): 'marked' or
    'unmarked', one of the names is asked for after them, its first token scored POINTED."""
    context, names = word_parts(rng, pool, filler, absent)
    if ask:  # not by its place in the list: no cue but the mark (words rows draw nothing more)
        asked = names[rng.integers(len(names))]
        context = mark(context, asked) if ask == "marked" else context
    tokens = tok.encode(" ".join(context))
    scored = [0] * len(tokens)
    for name in names:
        ids = tok.encode(" " + name)  # a space starts a token: the context's ids again
        guessed = first_name_token(tok, ids) + 1  # up to the name's first token: a guess
        tokens += ids
        scored += [0] * guessed + [1] * (len(ids) - guessed)
    if ask:
        query, ids = tok.encode(QUERY), tok.encode(" " + asked)
        first = first_name_token(tok, ids)
        tokens += query + ids + tok.encode(".")
        scored += [0] * (len(query) + first) + [POINTED] + [1] * (len(ids) - first - 1) + [0]
    return tokens, scored


def word_row(
    tok, rng, pool: tuple, filler: int, length: int, absent: bool = False, ask: str = ""
) -> tuple:
    """A words row in `tok`'s ids: (tokens [length], scored [length]); scored marks each
    repeated name's tokens after its first (first_name_token; absent: word_parts' control, names
    not repeated). ask='marked': a mention row (the module's docstring); 'unmarked': its control.
    Rows over `length` tokens are redrawn; ValueError when 100 draws in a row are."""
    if ask and absent:
        raise ValueError("word_row: a mention row asks for a name of its context; absent has none")
    for _ in range(100):
        tokens, scored = word_ids(tok, rng, pool, filler, absent, ask)
        if len(tokens) <= length:
            pad = tok.encode(" ")[-1:] * (length - len(tokens))
            return np.asarray(tokens + pad), np.asarray(scored + [0] * len(pad))
    raise ValueError(
        f"word_row: 100 rows of {filler} filler words ran over {length} tokens; "
        "fewer --words or a longer --half"
    )


def word_document(rng, pool: tuple, filler: int, ask: bool = False) -> dict:
    """A words row as an SFT chat document (the trace files' format): the user's message is the
    context, the assistant's the names in their new order, space-separated; `ask`: a mention
    row's, one name marked in the context and asked for after the names."""
    context, names = word_parts(rng, pool, filler)
    said = " ".join(names)
    if ask:
        asked = names[rng.integers(len(names))]
        context = mark(context, asked)
        said += f"{QUERY} {asked}."
    return {
        "messages": [
            {"role": "user", "content": " ".join(context)},
            {"role": "assistant", "content": said},
        ]
    }
