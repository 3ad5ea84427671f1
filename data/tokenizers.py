"""Tokenizers behind one interface.

Every tokenizer exposes `vocab_size`, `encode(text, allow_special=False) -> list[int]`,
`decode(ids) -> str`, `special_id(name) -> int` and the ids `bos_id`, `eos_id`, `pad_id`.

Special tokens (chat roles, tool calls, tool results, summaries) are never produced from raw text
unless `allow_special=True`: a file that contains the string "<|tool_call|>" must not become a
control token when an agent reads it.

`ByteTokenizer` is the default: ids 0..255 are the UTF-8 bytes, then the special tokens. It needs
no files, so tests and the default main job run anywhere.
"""
from __future__ import annotations

import re
from typing import Protocol, Sequence

# One list, one order: the byte tokenizer assigns ids 256.. in this order.
SPECIAL_TOKENS: tuple[str, ...] = (
    "pad", "bos", "eos",
    "system", "user", "assistant", "tool",   # role headers
    "end",                                   # end of a message
    "tool_call", "/tool_call",               # <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|>
    "tool_result", "/tool_result",
    "think", "/think",
    "summary", "/summary",
)


def special_text(name: str) -> str:
    """The surface string of a special token, e.g. 'tool_call' -> '<|tool_call|>'."""
    return f"<|{name}|>"


class Tokenizer(Protocol):
    vocab_size: int
    bos_id: int
    eos_id: int
    pad_id: int

    def encode(self, text: str, allow_special: bool = False) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def special_id(self, name: str) -> int: ...


_SPECIAL_RE = re.compile("(" + "|".join(re.escape(special_text(n)) for n in SPECIAL_TOKENS) + ")")


class ByteTokenizer:
    """UTF-8 bytes (ids 0..255) + SPECIAL_TOKENS (ids 256..). vocab_size = 256 + 16 = 272."""

    def __init__(self):
        self._special_to_id = {n: 256 + i for i, n in enumerate(SPECIAL_TOKENS)}
        self._id_to_special = {i: n for n, i in self._special_to_id.items()}
        self.vocab_size = 256 + len(SPECIAL_TOKENS)
        self.pad_id = self._special_to_id["pad"]
        self.bos_id = self._special_to_id["bos"]
        self.eos_id = self._special_to_id["eos"]

    def special_id(self, name: str) -> int:
        if name not in self._special_to_id:
            raise KeyError(f"unknown special token {name!r}; known: {', '.join(SPECIAL_TOKENS)}")
        return self._special_to_id[name]

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        if not allow_special:
            return list(text.encode("utf-8"))
        ids: list[int] = []
        for piece in _SPECIAL_RE.split(text):
            if piece.startswith("<|") and piece.endswith("|>") and piece[2:-2] in self._special_to_id:
                ids.append(self._special_to_id[piece[2:-2]])
            elif piece:
                ids.extend(piece.encode("utf-8"))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out, pending = [], bytearray()
        for i in ids:
            i = int(i)
            if i < 256:
                pending.append(i)
                continue
            out.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
            if i not in self._id_to_special:
                raise ValueError(f"token id {i} is outside the byte tokenizer's vocab ({self.vocab_size})")
            out.append(special_text(self._id_to_special[i]))
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)
