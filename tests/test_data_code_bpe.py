"""data/code_bpe.py and rl/envs/repos/vocabulary.py: the vocabulary learns from training
repositories only, deterministically, and loads through data/tokenizers.py with the control
tokens at their fixed ids."""

import itertools
import os

import pytest

from data.code_bpe import corpus, train_bpe
from data.tokenizers import SPECIAL_TOKENS, load_tokenizer, token_byte_lengths
from rl.envs.repos import vocabulary
from rl.envs.repos.holdout import HELD_OUT_REPOS

CODE = "def parse_header(line):\n    key, _, value = line.partition(':')\n    return key\n"


def small_corpus():
    """A few training files and 40 trace messages: seconds, not the whole corpus."""
    files = vocabulary.training_files()[:6]
    traces = itertools.islice(corpus([], vocabulary.EXPERT_TRACES), 40)
    return itertools.chain(corpus(files), traces)


def test_training_files_leave_out_every_held_out_repository():
    files = vocabulary.training_files()
    repos = {os.path.relpath(p, vocabulary.VENDOR).split(os.sep)[0] for p in files}
    assert repos and not repos & set(HELD_OUT_REPOS)
    assert all(p.endswith(".py") for p in files)
    # the held-out repositories are vendored too: leaving them out is the filter's doing
    assert set(HELD_OUT_REPOS) <= set(os.listdir(vocabulary.VENDOR))
    everything = vocabulary.training_files(held_out=())
    assert set(files) < set(everything)
    assert {os.path.relpath(p, vocabulary.VENDOR).split(os.sep)[0] for p in everything} - repos == (
        set(HELD_OUT_REPOS)
    )


def test_same_corpus_same_file_and_specials_first(tmp_path):
    a = train_bpe(small_corpus(), 600, str(tmp_path / "a.json"))
    b = train_bpe(small_corpus(), 600, str(tmp_path / "b.json"))
    assert open(a, "rb").read() == open(b, "rb").read()
    tok = load_tokenizer(f"hf:{a}")
    assert tok.vocab_size == 600
    assert [tok.special_id(n) for n in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    ids = tok.encode(CODE)
    assert tok.decode(ids) == CODE
    assert len(ids) < len(CODE.encode()) / 2  # merges learned from code shorten code
    assert int(token_byte_lengths(tok)[ids].sum()) == len(CODE.encode())
    assert tok.encode("<|tool_call|>") != [tok.special_id("tool_call")]  # raw text stays text


def test_a_vocabulary_smaller_than_bytes_and_specials_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least 272"):
        train_bpe(iter([CODE]), 100, str(tmp_path / "t.json"))
    with pytest.raises(SystemExit, match="error: code BPE vocab_size 100: at least 272"):
        vocabulary.main(["--vocab_size", "100", "--out", str(tmp_path / "t.json")])
    assert not os.path.exists(tmp_path / "t.json")


def test_identifiers_pattern_writes_a_name_as_the_same_ids_wherever_it_stands(tmp_path):
    """Under cl100k a word takes the character before it (` parse`, `` `parse ``, `(parse`), so
    the statement's backticked symbol and the call that names it are different ids and a copy
    of ids cannot write it; under "identifiers" every context gives the same ids. Both round
    trip, and "identifiers" is the longer in tokens (a space is a token of its own)."""
    name = "parse_header_value"
    contexts = ["fix `{}` now", "def {}(line)", '{{"pattern": "{}"}}', "x.{} = 1", "see {}."]
    spans = {}
    for pattern in ("cl100k", "identifiers"):
        path = train_bpe(small_corpus(), 600, str(tmp_path / f"{pattern}.json"), pattern)
        tok = load_tokenizer(f"hf:{path}")
        spans[pattern] = set()
        for context in contexts:
            text = context.format(name)
            ids = tok.encode(text)
            assert tok.decode(ids) == text
            # the tokens that cover the name: by characters, as eval/name_copy.py finds them
            lo = text.index(name)
            ends = [len(tok.decode(ids[:j])) for j in range(len(ids) + 1)]
            first = max(j for j, e in enumerate(ends) if e <= lo)
            last = min(j for j, e in enumerate(ends) if e >= lo + len(name))
            spans[pattern].add(tuple(ids[first:last]))
        spans[pattern + " tokens"] = len(tok.encode(CODE))
    assert len(spans["identifiers"]) == 1 and len(spans["cl100k"]) > 1
    assert spans["identifiers tokens"] > spans["cl100k tokens"]
    with pytest.raises(ValueError, match="code BPE pattern 'gpt2': one of"):
        train_bpe(iter([CODE]), 600, str(tmp_path / "t.json"), "gpt2")
