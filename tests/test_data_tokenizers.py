"""Tokenizers: byte default, HF tokenizer.json and tiktoken BPE from local fixture files."""

import os

import numpy as np
import pytest

from data.chat import render_messages
from data.tokenizers import (
    SPECIAL_TOKENS,
    ByteTokenizer,
    encode_array,
    load_tokenizer,
    special_text,
    token_byte_lengths,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "data")
SPECS = ["byte", f"hf:{FIXTURES}/tokenizer.json", f"tiktoken:{FIXTURES}/tiktoken.model"]
TEXT = "def f(x):\n    return x  # héllo 日本 <|tool_call|> <|endoftext|>\n"


@pytest.fixture(params=SPECS, ids=["byte", "hf", "tiktoken"])
def tok(request):
    return load_tokenizer(request.param)


def test_round_trip_and_ids_in_vocab(tok):
    ids = tok.encode(TEXT)
    assert tok.decode(ids) == TEXT
    assert 0 <= min(ids) and max(ids) < tok.vocab_size
    np.testing.assert_array_equal(encode_array(tok, TEXT), ids)


def test_raw_text_never_becomes_a_special_token(tok):
    special_ids = {tok.special_id(n) for n in SPECIAL_TOKENS}
    assert not special_ids & set(tok.encode(TEXT))


def test_allow_special_maps_each_surface_string_to_its_id(tok):
    for name in SPECIAL_TOKENS:
        text = f"a{special_text(name)}b"
        ids = tok.encode(text, allow_special=True)
        assert ids.count(tok.special_id(name)) == 1, name
        assert tok.decode(ids) == text
    assert len({tok.special_id(n) for n in SPECIAL_TOKENS}) == len(SPECIAL_TOKENS)


def test_byte_lengths_sum_to_utf8_length(tok):
    lengths = token_byte_lengths(tok)
    assert lengths.shape == (tok.vocab_size,)
    assert lengths[tok.encode(TEXT)].sum() == len(TEXT.encode("utf-8"))
    assert lengths[[tok.special_id(n) for n in SPECIAL_TOKENS]].sum() == 0


def test_chat_renders_with_every_tokenizer(tok):
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [{"name": "f", "arguments": {"x": 1}}],
        },
    ]
    ids, mask = render_messages(tok, messages)
    assert ids[0] == tok.bos_id and len(ids) == len(mask)
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    assert trained == 'ok<|tool_call|>{"name": "f", "arguments": {"x": 1}}<|/tool_call|><|end|>'


def test_byte_tokenizer_is_the_default():
    tok = load_tokenizer()
    assert isinstance(tok, ByteTokenizer) and tok.vocab_size == 272


def test_hf_special_map_reuses_the_files_own_token():
    tok = load_tokenizer(
        {
            "kind": "hf",
            "path": f"{FIXTURES}/tokenizer.json",
            "special_map": {"eos": "<|endoftext|>"},
        }
    )
    assert tok.eos_id == 0  # '<|endoftext|>' is id 0 in the fixture
    assert tok.decode(tok.encode("<|eos|>", allow_special=True)) == "<|eos|>"


def test_tiktoken_special_ids_override():
    tok = load_tokenizer(
        {"kind": "tiktoken", "path": f"{FIXTURES}/tiktoken.model", "special_ids": {"bos": 1000}}
    )
    assert tok.bos_id == 1000 and tok.vocab_size == 1001 and tok.special_id("pad") == 384


@pytest.mark.parametrize(
    "spec, message",
    [
        ("hf:/nonexistent/tokenizer.json", "/nonexistent/tokenizer.json"),
        ("tiktoken:/nonexistent/tiktoken.model", "/nonexistent/tiktoken.model"),
        ("sentencepiece:/x.model", "expected 'byte'"),
        ({"kind": "bpe"}, "unknown kind"),
    ],
)
def test_bad_specs_name_the_problem(spec, message):
    with pytest.raises((FileNotFoundError, ValueError), match=message):
        load_tokenizer(spec)


def test_hf_special_map_rejects_unknown_tokens():
    with pytest.raises(KeyError, match="not in the vocabulary"):
        load_tokenizer(
            {"kind": "hf", "path": f"{FIXTURES}/tokenizer.json", "special_map": {"bos": "<s>"}}
        )
