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

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

# One list, one order: the byte tokenizer assigns ids 256.. in this order.
SPECIAL_TOKENS: tuple[str, ...] = (
    "pad",
    "bos",
    "eos",
    "system",
    "user",
    "assistant",
    "tool",  # role headers
    "end",  # end of a message
    "tool_call",
    "/tool_call",  # <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|>
    "tool_result",
    "/tool_result",
    "think",
    "/think",
    "summary",
    "/summary",
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


class _SpecialIds:
    """special_id() for tokenizers that fill self._special_to_id {name: id}."""

    _special_to_id: dict[str, int]

    def special_id(self, name: str) -> int:
        if name not in self._special_to_id:
            raise KeyError(f"unknown special token {name!r}; known: {', '.join(SPECIAL_TOKENS)}")
        return self._special_to_id[name]


class ByteTokenizer(_SpecialIds):
    """UTF-8 bytes (ids 0..255) + SPECIAL_TOKENS (ids 256..). vocab_size = 256 + 16 = 272."""

    def __init__(self):
        self._special_to_id = {n: 256 + i for i, n in enumerate(SPECIAL_TOKENS)}
        self._id_to_special = {i: n for n, i in self._special_to_id.items()}
        self.vocab_size = 256 + len(SPECIAL_TOKENS)
        self.pad_id = self._special_to_id["pad"]
        self.bos_id = self._special_to_id["bos"]
        self.eos_id = self._special_to_id["eos"]

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        if not allow_special:
            return list(text.encode("utf-8"))
        ids: list[int] = []
        for piece in _SPECIAL_RE.split(text):
            if (
                piece.startswith("<|")
                and piece.endswith("|>")
                and piece[2:-2] in self._special_to_id
            ):
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
                raise ValueError(
                    f"token id {i} is outside the byte tokenizer's vocab ({self.vocab_size})"
                )
            out.append(special_text(self._id_to_special[i]))
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)


# ---------------------------------------------------------------------------------------------
# File-backed tokenizers (HF tokenizer.json, tiktoken BPE) and the factory. All read local files
# only; nothing is ever downloaded.
#
# Our special tokens keep their surface form "<|name|>" on every backend: `encode(...,
# allow_special=True)` recognises exactly those strings and `decode` writes them back, so the chat
# template renders the same text whatever the vocabulary. A backend may map a name onto one of its
# own tokens (Kimi's '<|im_user|>' for 'user'); names it lacks get fresh ids after its vocabulary.
# ---------------------------------------------------------------------------------------------

# GPT-2 / tiktoken-style pre-tokenisation regex (cl100k); Kimi's file needs its own (pass pat_str).
DEFAULT_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def _encode_with_specials(
    text: str, special_to_id: Mapping[str, int], encode_raw: Callable[[str], list[int]]
) -> list[int]:
    """Splits on our '<|name|>' strings; the pieces between them go through the raw encoder."""
    ids: list[int] = []
    for piece in _SPECIAL_RE.split(text):
        if piece.startswith("<|") and piece.endswith("|>") and piece[2:-2] in special_to_id:
            ids.append(special_to_id[piece[2:-2]])
        elif piece:
            ids.extend(encode_raw(piece))
    return ids


def _decode_with_specials(
    ids: Sequence[int], id_to_special: Mapping[int, str], decode_raw: Callable[[list[int]], str]
) -> str:
    """Runs of ordinary ids go through the backend decoder; our special ids become '<|name|>'."""
    out, run = [], []
    for i in ids:
        i = int(i)
        if i in id_to_special:
            out.append(decode_raw(run) if run else "")
            out.append(special_text(id_to_special[i]))
            run = []
        else:
            run.append(i)
    out.append(decode_raw(run) if run else "")
    return "".join(out)


def _gpt2_unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the alphabet ByteLevel BPE vocabularies are written
    in."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class HFTokenizer(_SpecialIds):
    """A HuggingFace `tokenizer.json` through the `tokenizers` library (local file only).

    special_map: optional {our name: the tokenizer's own token string}. Names without a mapping use
    the token '<|name|>' if the file has it, else are added as new special tokens.
    """

    def __init__(self, path: str, special_map: Mapping[str, str] | None = None):
        from tokenizers import AddedToken
        from tokenizers import Tokenizer as _HFTok

        if not os.path.isfile(path):
            raise FileNotFoundError(f"HF tokenizer file not found: {path}")
        tok = _HFTok.from_file(path)
        special_map = dict(special_map or {})
        unknown = set(special_map) - set(SPECIAL_TOKENS)
        if unknown:
            raise KeyError(f"{path}: special_map names unknown special tokens {sorted(unknown)}")
        missing = [
            special_text(n)
            for n in SPECIAL_TOKENS
            if n not in special_map and tok.token_to_id(special_text(n)) is None
        ]
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in missing])
        self._special_to_id = {}
        for name in SPECIAL_TOKENS:
            surface = special_map.get(name, special_text(name))
            token_id = tok.token_to_id(surface)
            if token_id is None:
                raise KeyError(
                    f"{path}: special_map[{name!r}] = {surface!r} is not in the vocabulary"
                )
            self._special_to_id[name] = token_id
        self._id_to_special = {i: n for n, i in self._special_to_id.items()}
        # Two instances so threads never toggle shared state: the raw one treats every special
        # string in the text as plain text (a file containing '<|endoftext|>' stays text).
        self._raw = _HFTok.from_str(tok.to_str())
        self._raw.encode_special_tokens = True
        self._tok = tok
        self.path = path
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self.pad_id, self.bos_id, self.eos_id = (
            self._special_to_id[n] for n in ("pad", "bos", "eos")
        )

    def _encode_raw(self, text: str) -> list[int]:
        return self._raw.encode(text, add_special_tokens=False).ids

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        if not allow_special:
            return self._encode_raw(text)
        return _encode_with_specials(text, self._special_to_id, self._encode_raw)

    def decode(self, ids: Sequence[int]) -> str:
        return _decode_with_specials(
            ids, self._id_to_special, lambda run: self._tok.decode(run, skip_special_tokens=False)
        )

    def token_byte_lengths(self) -> np.ndarray:
        """[vocab_size] int32: UTF-8 bytes each token stands for (0 for special tokens).

        Exact for ByteLevel BPE vocabularies (GPT-2 alphabet) and '<0xNN>' byte-fallback tokens;
        other tokens count the UTF-8 length of their text with SentencePiece's '▁' as one space.
        """
        alphabet = _gpt2_unicode_to_byte()
        special = {t.content for t in self._tok.get_added_tokens_decoder().values() if t.special}
        lengths = np.zeros(self.vocab_size, np.int32)
        for i in range(self.vocab_size):
            piece = self._tok.id_to_token(i)
            if piece is None or piece in special or i in self._id_to_special:
                continue
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                lengths[i] = 1
            elif all(c in alphabet for c in piece):
                lengths[i] = len(piece)
            else:
                lengths[i] = len(piece.replace("\u2581", " ").encode("utf-8"))
        return lengths


class TiktokenTokenizer(_SpecialIds):
    """A tiktoken-format BPE file (one 'base64-token rank' per line, e.g. Kimi's tiktoken.model).

    Loaded through tiktoken's own loader from a local path. special_ids: optional {our name: id}
    (e.g. the ids Kimi's tokenizer_config.json assigns); other names get ids after the ranks.
    """

    def __init__(
        self,
        path: str,
        pat_str: str = DEFAULT_PAT_STR,
        special_ids: Mapping[str, int] | None = None,
    ):
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        if not os.path.isfile(path):
            raise FileNotFoundError(f"tiktoken BPE file not found: {path}")
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        # The loader caches by path; passing the file's own hash makes it reject a stale cache.
        ranks = load_tiktoken_bpe(path, expected_hash=digest)
        special_ids = dict(special_ids or {})
        unknown = set(special_ids) - set(SPECIAL_TOKENS)
        if unknown:
            raise KeyError(f"{path}: special_ids names unknown special tokens {sorted(unknown)}")
        taken, next_id = set(special_ids.values()), max(ranks.values()) + 1
        self._special_to_id = {}
        for name in SPECIAL_TOKENS:  # unmapped names take the first free ids after the ranks
            if name in special_ids:
                self._special_to_id[name] = special_ids[name]
                continue
            while next_id in taken:
                next_id += 1
            self._special_to_id[name], next_id = next_id, next_id + 1
        self._id_to_special = {i: n for n, i in self._special_to_id.items()}
        self._enc = tiktoken.Encoding(
            name=os.path.basename(path),
            pat_str=pat_str,
            mergeable_ranks=ranks,
            special_tokens={special_text(n): i for n, i in self._special_to_id.items()},
        )
        self._ranks = ranks
        self.path = path
        self.vocab_size = max(*ranks.values(), *self._special_to_id.values()) + 1
        self.pad_id, self.bos_id, self.eos_id = (
            self._special_to_id[n] for n in ("pad", "bos", "eos")
        )

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        if not allow_special:
            return self._enc.encode_ordinary(text)
        return _encode_with_specials(text, self._special_to_id, self._enc.encode_ordinary)

    def decode(self, ids: Sequence[int]) -> str:
        return _decode_with_specials(ids, self._id_to_special, self._enc.decode)

    def token_byte_lengths(self) -> np.ndarray:
        """[vocab_size] int32: bytes of each rank's token; 0 for special and unused ids."""
        lengths = np.zeros(self.vocab_size, np.int32)
        for token, rank in self._ranks.items():
            lengths[rank] = len(token)
        for i in self._id_to_special:
            lengths[i] = 0
        return lengths


def token_byte_lengths(tok: Tokenizer) -> np.ndarray:
    """[vocab_size] int32: how many UTF-8 bytes of text each token id covers (0 for specials).

    Summed over a document's target tokens this gives the document's byte count, which turns a
    summed NLL into bits per byte (NLL / ln 2 / bytes), comparable across tokenizers.
    """
    if hasattr(tok, "token_byte_lengths"):
        return tok.token_byte_lengths()
    if isinstance(tok, ByteTokenizer):
        lengths = np.zeros(tok.vocab_size, np.int32)
        lengths[:256] = 1
        return lengths
    raise TypeError(f"no byte-length table for tokenizer {type(tok).__name__}")


def encode_array(tok: Tokenizer, text: str) -> np.ndarray:
    """encode(text) as int32 numpy; the byte tokenizer skips the Python list (≈50× faster)."""
    if isinstance(tok, ByteTokenizer):
        return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)
    return np.asarray(tok.encode(text), np.int32)


def spec_dict(spec: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """load_tokenizer's spec as a mapping: {"kind": ..., "path": ..., options}."""
    if spec is None or spec == "byte":
        return {"kind": "byte"}
    if isinstance(spec, str):
        kind, sep, path = spec.partition(":")
        if not sep or kind not in ("hf", "tiktoken"):
            raise ValueError(
                f"tokenizer spec {spec!r}: expected 'byte', 'hf:PATH' or 'tiktoken:PATH'"
            )
        return {"kind": kind, "path": path}
    return dict(spec)


def load_tokenizer(spec: str | Mapping[str, Any] | None = "byte") -> Tokenizer:
    """Builds a tokenizer from a spec; files are local paths, nothing is downloaded.

    spec: 'byte' (default, no files) | 'hf:/path/tokenizer.json' | 'tiktoken:/path/tiktoken.model'
          | a mapping {'kind': 'byte'|'hf'|'tiktoken', 'path': ..., plus 'special_map' (hf) or
          'special_ids' / 'pat_str' (tiktoken)}.
    """
    options = spec_dict(spec)
    kind = options.pop("kind", None)
    if kind == "byte":
        if options:
            raise ValueError(f"tokenizer spec {dict(spec)!r}: the byte tokenizer takes no options")
        return ByteTokenizer()
    if kind == "hf":
        return HFTokenizer(**options)
    if kind == "tiktoken":
        return TiktokenTokenizer(**options)
    raise ValueError(f"tokenizer spec {dict(spec)!r}: unknown kind {kind!r} (byte | hf | tiktoken)")
