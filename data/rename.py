"""Identifier renaming for SFT traces: one trace becomes many, each naming its symbols afresh.

Why: the real-repository expert traces name only ~200 distinct symbols (19 training
repositories). A small policy trained on them learns those names as text rather than copying the
statement's name into its calls (issue 52: its first search named the statement's symbol in 1 of
21 held-out episodes and 0 of 13 training ones). Renaming the statement's symbols consistently
through the whole trace (statement, the agent's words and calls, every tool output) keeps the
trace a faithful transcript of a repository where those functions carry other names, and makes
the name something the policy can only get by copying it.

Only names safe to rename are renamed: not dunders (`__init__` means something), not Python
keywords or builtins, not a method of a builtin type (`get`, `copy`, `update` also name calls on
dicts and lists in the code the trace shows), and at least 3 characters. Matching is by whole
identifier (`parse` never touches `parse_version`). A renamed trace is not re-graded: it is SFT
text, and its `renamed` field maps each new name to the original.

New names are syllable words (`hu_za_bi`) by default, or, given a word pool (`word_pool` of the
training repositories' files), 2-3 of their identifier words (`cache_header_parse`): a policy
SFT'd on syllable names learns to write syllable names where it should copy (issue 52, session
40's transcripts); with pool words the renamer's style is the code's own. With `match`, a new
name has the old one's shape, as many words (1-3) and lowerCamel kept: a policy SFT'd only on
names of 2-3 words learns that a name never starts with a whole-name token and does not write a
one-word symbol (`toposort`, one token of the identifiers vocabulary) where it should (issue
52, session 46).
"""

from __future__ import annotations

import builtins
import collections
import keyword
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_WORD = r"[A-Za-z0-9_]"
_BUILTIN_TYPES = (dict, list, str, set, tuple, bytes, int, float, frozenset, object, type)
RESERVED = frozenset(
    set(dir(builtins)) | set(keyword.kwlist) | {a for t in _BUILTIN_TYPES for a in dir(t)}
)
_SYLLABLES = tuple(c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou")


def whole_word(pattern: str) -> str:
    """`pattern` (a regex) matched only as a whole identifier (`parse` not in `parse_version`)."""
    return rf"(?<!{_WORD})(?:{pattern})(?!{_WORD})"


def renamable(name: str) -> bool:
    """True for an identifier safe to rename in a trace (module docstring)."""
    return (
        re.fullmatch(IDENT, name) is not None
        and len(name) >= 3
        and not (name.startswith("__") and name.endswith("__"))
        and name not in RESERVED
    )


def backticked_names(text: str) -> list[str]:
    """The renamable identifiers inside `text`'s backticked spans, first occurrence order."""
    names: list[str] = []
    for span in re.findall(r"`([^`]+)`", text):
        for name in re.findall(IDENT, span):
            if renamable(name) and name not in names:
                names.append(name)
    return names


def identifier_words(text: str) -> list[str]:
    """The lowercase words of `text`'s identifiers, split at `_` and camelCase humps, 3+ letters,
    each occurrence (`parseHTTPHeader_v2` -> parse, http, header)."""
    words = []
    for ident in re.findall(IDENT, text):
        for part in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", ident):
            if len(part) >= 3:
                words.append(part.lower())
    return words


def word_pool(files: Sequence[str], least: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(the identifier words of `files`, sorted, their cumulative frequencies): a word is drawn
    as often as the code uses it (`self`, `name` often). ValueError under `least` words."""
    counts = collections.Counter()
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            counts.update(identifier_words(f.read()))
    if len(counts) < least:
        raise ValueError(f"word_pool: {len(counts)} words in {len(files)} files; need {least}")
    words = np.asarray(sorted(counts))
    cdf = np.cumsum([counts[w] for w in words], dtype=np.float64)
    return words, cdf / cdf[-1]


def word_count(name: str) -> int:
    """The words of identifier `name`, split at `_` and camelCase humps, any length
    (`toposort` 1, `FixedTzOffset` 3, `_parse_v2` 3)."""
    return len(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", name))


def fresh_name(
    old: str, rng: random.Random, taken: set[str], pool: tuple | None = None, match: bool = False
) -> str:
    """A new identifier in `old`'s style (leading underscores, CamelCase or snake_case), not in
    `taken` and not reserved: 2-3 words of 1-3 syllables, or of `pool`'s words (word_pool).
    match: `old`'s shape as well: as many words (word_count, 1-3) instead of 2-3, so that a
    one-word symbol gets a one-word name, as real statements' symbols mostly are, and lowerCamel
    kept (`toRoman` -> `cacheHeader`, not `cache_header`)."""
    lead, bare = old[: len(old) - len(old.lstrip("_"))], old.lstrip("_")
    camel = bare[:1].isupper()
    lower_camel = match and bare[:1].islower() and re.search("[a-z][A-Z]", bare) is not None
    matched = min(max(word_count(old), 1), 3)
    while True:
        n = matched if match else rng.randint(2, 3)
        if pool is None:
            words = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(n)]
        else:
            words = [str(w) for w in rng.choices(pool[0], cum_weights=pool[1], k=n)]
        if camel or lower_camel:
            body = "".join(w.capitalize() for w in words)
            body = body[:1].lower() + body[1:] if lower_camel else body
        else:
            body = "_".join(words)
        name = lead + body
        if name not in taken and renamable(name):
            return name


def _sub(value: Any, pattern: re.Pattern, mapping: Mapping[str, str]) -> Any:
    """`value` (a string, or JSON-like lists and dicts of them) with every whole identifier in
    `mapping` replaced."""
    if isinstance(value, str):
        return pattern.sub(lambda m: mapping[m.group(0)], value)
    if isinstance(value, list):
        return [_sub(v, pattern, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _sub(v, pattern, mapping) for k, v in value.items()}
    return value


def rename_messages(
    messages: Sequence[dict[str, Any]], mapping: Mapping[str, str]
) -> list[dict[str, Any]]:
    """`messages` with each identifier in `mapping` (old -> new) replaced by whole-identifier
    match in every content and tool-call argument; roles, names and weights kept."""
    if not mapping:
        return [dict(m) for m in messages]
    words = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(whole_word(words))
    out = []
    for m in messages:
        new = dict(m, content=_sub(m.get("content", ""), pattern, mapping))
        if m.get("tool_calls"):
            new["tool_calls"] = [
                dict(c, arguments=_sub(c.get("arguments", {}), pattern, mapping))
                for c in m["tool_calls"]
            ]
        out.append(new)
    return out


def renamed_trace(
    trace: Mapping[str, Any], rng: random.Random, pool: tuple | None = None, match: bool = False
) -> dict[str, Any] | None:
    """A copy of `trace` (its "messages": system, user statement, ...) with every renamable name
    the statement backticks renamed afresh (fresh_name, of `pool`'s words when given, in the old
    name's shape with `match`); None when the statement names none. The copy's "renamed" maps
    new -> old; its "id" gains a suffix; tokens are the caller's to recount."""
    messages = trace["messages"]
    statement = next((m["content"] for m in messages if m["role"] == "user"), "")
    olds = backticked_names(statement)
    if not olds:
        return None
    text = repr(messages)  # every identifier already in the trace is taken
    taken = set(re.findall(IDENT, text))
    mapping: dict[str, str] = {}
    for old in olds:
        mapping[old] = fresh_name(old, rng, taken, pool, match)
        taken.add(mapping[old])
    suffix = "-".join(mapping[o] for o in olds)
    return dict(
        trace,
        id=f"{trace['id']}-renamed-{suffix}",
        messages=rename_messages(messages, mapping),
        renamed={new: old for old, new in mapping.items()},
    )
