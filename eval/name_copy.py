"""The name-copy probe (issue 52): teacher-forced, can the policy write the symbol the statement
names where the expert's call names it?

A held-out episode shows the same skill sampled (eval/copy_rate.py search_stats), but one
episode a task and ~10 searches a set make a noisy figure, and a first search that goes wrong
ends the measurement. Here each expert trace (rl/envs/repo_traces.py's, or data/rename.py's
renamed copy of it, whose names no training trace holds) is cut after its first assistant turn
that names a symbol the statement backticks; the policy reads the prefix up to that name and
predicts its tokens, each from the true tokens before it (teacher forcing). Any tokenizer: the
name's tokens are found by characters (name_span), so a BPE token that carries the quote before
the name counts as the name's first.

    rows = naming_rows(tok, traces, seq_len)      # (ids, where the name starts, its length)
    name_copy_probe(cfg, params, rows, seq_len)   # {"names", "names_exact", "name_bytes", ...}

names_exact: the fraction of names whose every token is the argmax (greedy decoding would write
the name whole from that point); name_bytes: the mean fraction of a name's tokens that are (its
bytes under the byte tokenizer; the key keeps that name); name_first: the fraction of names whose
first token is. The first token and the rest need different mechanisms: the rest is a copy keyed
on the token before (an induction head), the first has no such key (the statement's occurrence
follows a backtick, the call's a quote or `def `): it needs a pointer to "the symbol the
statement backticks", so a policy can copy well and still start the wrong name.
first_token_odds says how far off a missed first token is: its rank among the vocabulary, its
probability, and what the argmax writes instead.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from data.chat import render_messages
from data.rename import backticked_names, whole_word
from data.tokenizers import SPECIAL_TOKENS, Tokenizer


def naming_prefix(messages: Sequence[Mapping]) -> tuple[list, str] | None:
    """(messages up to the first assistant turn naming a statement's symbol, that symbol), or
    None when no turn names one."""
    statement = next((m["content"] for m in messages if m["role"] == "user"), "")
    names = backticked_names(statement)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        text = m.get("content", "") + json.dumps(m.get("tool_calls") or [], ensure_ascii=False)
        named = [n for n in names if re.search(whole_word(re.escape(n)), text)]
        if named:
            return list(messages[: i + 1]), named[0]
    return None


def char_ends(tok: Tokenizer, ids: Sequence[int]) -> list[int]:
    """[len(ids) + 1]: the characters tok.decode writes for ids[:j], per j."""
    return [len(tok.decode(ids[:j])) for j in range(len(ids) + 1)]


def covering(ends: list[int], lo: int, hi: int) -> tuple[int, int]:
    """(first, last): ids[first:last] are the fewest tokens covering characters [lo, hi)."""
    first = max(j for j, e in enumerate(ends) if e <= lo)
    return first, min(j for j, e in enumerate(ends) if e >= hi)


def name_span(tok: Tokenizer, ids: Sequence[int], turn: int, name: str) -> tuple | None:
    """(start, length) of the tokens that write `name`'s first whole occurrence (not inside a
    longer identifier, not a control token's text) in ids[turn:], or None. Found by character
    offsets, not by matching tok.encode(name): a BPE vocabulary tokenizes a name by its
    neighbours (a token may carry the quote before it), the byte tokenizer gives the name's bytes.
    """
    ends = char_ends(tok, ids[turn:])
    control = {tok.special_id(n) for n in SPECIAL_TOKENS}
    for m in re.finditer(whole_word(re.escape(name)), tok.decode(ids[turn:])):
        first, last = covering(ends, m.start(), m.end())
        if not control & set(ids[turn + first : turn + last]):
            return turn + first, last - first
    return None


def naming_rows(tok: Tokenizer, traces: Sequence[Mapping], seq_len: int) -> list[tuple]:
    """(ids, start, length) per trace whose naming prefix fits seq_len: the name's first
    occurrence in the last (naming) turn at ids[start:start + length] (name_span)."""
    rows = []
    for trace in traces:
        cut = naming_prefix(trace["messages"])
        if cut is None:
            continue
        messages, name = cut
        ids, mask = render_messages(tok, messages)
        turn = max(i for i, m in enumerate(mask) if not m) + 1  # the naming turn's first id
        span = name_span(tok, ids, turn, name)
        if span and len(ids) <= seq_len:
            rows.append((ids, *span))
    return rows


def statement_offset(text: str, name: str) -> int:
    """The character offset of `name`'s first whole occurrence inside a backticked span of
    `text` (the statement's, as data/rename.py backticked_names finds names)."""
    for span in re.finditer(r"`([^`]+)`", text):
        hit = re.search(whole_word(re.escape(name)), span.group(1))
        if hit:
            return span.start(1) + hit.start()
    raise ValueError(f"{name!r} is in no backticked span")


def same_ids_as_statement(tok: Tokenizer, rows: Sequence[tuple]) -> dict:
    """Over naming_rows: the share of names whose first token, and whose whole token sequence,
    in the naming turn are the ids of the statement's backticked occurrence. Below 1, a copy of
    ids cannot write the name: the vocabulary tokenizes it by its neighbours (data/code_bpe.py's
    patterns)."""
    first, whole = [], []
    for ids, start, n in rows:
        written = list(ids[start : start + n])
        name = re.search(r"[A-Za-z_][A-Za-z0-9_]*", tok.decode(written)).group()
        lo = statement_offset(tok.decode(ids[:start]), name)
        first_id, last_id = covering(char_ends(tok, ids[:start]), lo, lo + len(name))
        stated = list(ids[first_id:last_id])
        first.append(stated[0] == written[0])
        whole.append(stated == written)
    return {"first": float(np.mean(first)), "whole": float(np.mean(whole))}


@functools.lru_cache(maxsize=4)
def greedy_fn(cfg):
    """A jitted forward of `cfg`'s model: (params, tokens [B,T]) -> the argmax next token at each
    position [B,T]. Cached per config: every stage's probe reuses one compiled program."""
    from model import Transformer

    def greedy(params, tokens):
        logits = Transformer(cfg).apply({"params": params}, tokens, with_mtp=False).logits
        return jnp.argmax(logits, -1)

    return jax.jit(greedy)


def padded(chunk: Sequence[tuple], batch: int, seq_len: int) -> np.ndarray:
    """[batch, seq_len] int32: the ids of `chunk`'s rows (naming_rows) zero-padded; a short last
    chunk padded with empty rows (one compiled shape)."""
    tokens = np.zeros((batch, seq_len), np.int32)
    for b, (ids, _, _) in enumerate(chunk):
        tokens[b, : len(ids)] = ids
    return tokens


def name_copy_probe(cfg, params, rows: Sequence[tuple], seq_len: int, batch: int = 4) -> dict:
    """The module docstring's figures over `rows` (naming_rows), rows padded to seq_len."""
    if not rows:
        raise ValueError("name_copy_probe: no trace names a statement's symbol within seq_len")
    greedy = greedy_fn(cfg)
    exact, byte_share, first = [], [], []
    for lo in range(0, len(rows), batch):
        chunk = rows[lo : lo + batch]
        pred = np.asarray(greedy(params, padded(chunk, batch, seq_len)))
        for b, (ids, start, n) in enumerate(chunk):
            hit = pred[b, start - 1 : start - 1 + n] == np.asarray(ids[start : start + n])
            exact.append(bool(hit.all()))
            byte_share.append(float(hit.mean()))
            first.append(bool(hit[0]))
    return {
        "names": len(rows),
        "names_exact": float(np.mean(exact)),
        "name_bytes": float(np.mean(byte_share)),
        "name_first": float(np.mean(first)),
    }


@functools.lru_cache(maxsize=4)
def next_logprobs_fn(cfg):
    """A jitted forward of `cfg`'s model: (params, tokens [B,T], at [B]) -> the log-probabilities
    of the token after position at[b] [B,V]. Cached per config, as greedy_fn."""
    from model import Transformer

    def next_logprobs(params, tokens, at):
        logits = Transformer(cfg).apply({"params": params}, tokens, with_mtp=False).logits
        return jax.nn.log_softmax(logits[jnp.arange(tokens.shape[0]), at].astype(jnp.float32), -1)

    return jax.jit(next_logprobs)


def first_token_odds(cfg, params, rows: Sequence[tuple], seq_len: int, batch: int = 4) -> dict:
    """Per row of `rows` (naming_rows), at the name's first token: {"ranks": how many vocabulary
    ids the model puts above it (0: the argmax writes it), "probs": its probability, "written":
    the argmax id}, lists in rows' order; rows padded to seq_len."""
    if not rows:
        raise ValueError("first_token_odds: no trace names a statement's symbol within seq_len")
    next_logprobs = next_logprobs_fn(cfg)
    out = {"ranks": [], "probs": [], "written": []}
    for lo in range(0, len(rows), batch):
        chunk = rows[lo : lo + batch]
        at = np.zeros(batch, np.int32)  # the position before each name: its logits predict it
        at[: len(chunk)] = [start - 1 for _, start, _ in chunk]
        logp = np.asarray(next_logprobs(params, padded(chunk, batch, seq_len), at))  # [batch, V]
        for b, (ids, start, _) in enumerate(chunk):
            true = logp[b, ids[start]]
            out["ranks"].append(int((logp[b] > true).sum()))
            out["probs"].append(float(np.exp(true)))
            out["written"].append(int(logp[b].argmax()))
    return out
