"""bench/copy_words.py: the words rows ask for the same copy under the byte tokenizer and a code
BPE vocabulary (a name's later occurrence is the same ids as its earlier one, and only the
tokens that occurrence gives are scored); their drills are those rows in chat form."""

import collections
import itertools
import json
import re

import numpy as np
import pytest

from bench import bench_copy, copy_words
from data.code_bpe import corpus, train_bpe
from data.rename import word_pool
from data.tokenizers import ByteTokenizer, load_tokenizer
from rl.envs.repos import vocabulary


@pytest.fixture(scope="module")
def pool():
    return word_pool(vocabulary.training_files()[:20])


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A 600-id vocabulary of a few training files and 40 trace messages (seconds)."""
    texts = itertools.chain(
        corpus(vocabulary.training_files()[:6]),
        itertools.islice(corpus([], vocabulary.EXPERT_TRACES), 40),
    )
    path = train_bpe(texts, 600, str(tmp_path_factory.mktemp("bpe") / "v.json"))
    return load_tokenizer(f"hf:{path}")


@pytest.fixture(scope="module")
def bpe_identifiers(tmp_path_factory):
    """The same texts under the `identifiers` pattern: a space is a token of its own."""
    texts = itertools.chain(
        corpus(vocabulary.training_files()[:6]),
        itertools.islice(corpus([], vocabulary.EXPERT_TRACES), 40),
    )
    path = str(tmp_path_factory.mktemp("bpe") / "v.json")
    return load_tokenizer(f"hf:{train_bpe(texts, 600, path, pattern='identifiers')}")


def test_pool_is_sorted_with_frequencies(pool):
    words, cdf = pool
    assert words.tolist() == sorted(set(words)) and len(words) > 100
    freq = np.diff(cdf, prepend=0)
    assert np.isclose(cdf[-1], 1) and (freq > 0).all()
    drawn = copy_words.draw_words(np.random.default_rng(0), pool, 20_000)
    for word in ("self", "assert", words[0]):  # drawn as often as the files use them
        share = freq[words.tolist().index(word)]
        assert abs(drawn.count(word) / 20_000 - share) < 4 * np.sqrt(share / 20_000) + 1e-4
    with pytest.raises(ValueError, match="word_pool: 0 words in 0 files"):
        word_pool([])


@pytest.mark.parametrize("tokenizer", ["byte", "bpe", "identifiers"])
def test_a_scored_token_is_what_followed_its_key_in_the_names_earlier_occurrence(
    tokenizer, pool, bpe, bpe_identifiers
):
    """Each repeated name is the very ids of its occurrence in the context; scored: its tokens
    after the one that holds its first character (which name comes next is a guess; under
    `identifiers` the space before it is a token of its own); nothing else scored; padding to
    the row's length."""
    tok = {"byte": ByteTokenizer(), "bpe": bpe, "identifiers": bpe_identifiers}[tokenizer]
    length = 512 if tokenizer == "byte" else 256
    rng, leads = np.random.default_rng(0), set()
    for _ in range(20):
        state = rng.bit_generator.state
        tokens, scored = copy_words.word_row(tok, rng, pool, 16, length)
        rng.bit_generator.state = state
        context, names = copy_words.word_parts(rng, pool, 16)
        assert len(tokens) == len(scored) == length
        n_context = len(tok.encode(" ".join(context)))
        ids, pos = tokens.tolist(), n_context
        assert not scored[:n_context].any()
        for name in names:
            name_ids = tok.encode(" " + name)
            assert ids[pos : pos + len(name_ids)] == name_ids
            assert any(ids[j : j + len(name_ids)] == name_ids for j in range(n_context)), (
                name
            )  # the same ids earlier: a copy by content writes them
            guessed = len(name_ids) - int(scored[pos : pos + len(name_ids)].sum())
            expected = [0] * guessed + [1] * (len(name_ids) - guessed)
            assert scored[pos : pos + len(name_ids)].tolist() == expected
            head = tok.decode(name_ids[:guessed])  # the guess holds the name's first character
            assert head.strip() and name.startswith(head.strip()), (head, name)
            assert not tok.decode(name_ids[: guessed - 1]).strip()  # and only blanks before it
            leads.add(guessed)
            pos += len(name_ids)
        assert not scored[pos:].any() and tok.decode(ids[pos:]).strip() == ""
    # bytes and `identifiers`: the space is a token of its own, then the first letter / word;
    # cl100k's pattern: ` cache` is one token, or ` ` and `c` where this small vocabulary
    # has not merged them
    assert leads == {"byte": {2}, "bpe": {1, 2}, "identifiers": {2}}[tokenizer]


def test_control_rows_name_what_the_context_never_held(pool, bpe):
    """absent: the same context as the row of that rng state, then other names, none of them
    in the context (nothing to copy), scored the same way."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        state = rng.bit_generator.state
        context, names = copy_words.word_parts(rng, pool, 16)
        rng.bit_generator.state = state
        context_again, others = copy_words.word_parts(rng, pool, 16, absent=True)
        assert context_again == context and 0 < len(others) <= copy_words.NAMES
        assert not set(others) & set(names) and all(n not in context for n in others)
        assert all("_" in n for n in others)
    tokens, scored = copy_words.word_row(bpe, rng, pool, 16, 256, absent=True)
    assert scored.sum() > 0 and len(tokens) == 256


def asked_span(tok, tokens: list, name: str) -> tuple[int, list]:
    """(where the mention query's `name` starts in `tokens`, its ids): after the last QUERY."""
    query, name_ids = tok.encode(copy_words.QUERY), tok.encode(" " + name)
    starts = [j for j in range(len(tokens)) if tokens[j : j + len(query)] == query]
    return starts[-1] + len(query), name_ids


@pytest.mark.parametrize("tokenizer", ["byte", "bpe", "identifiers"])
def test_mention_rows_ask_for_the_one_marked_name(tokenizer, pool, bpe, bpe_identifiers):
    """A mention row: the words row of that rng state with one of its names in backticks, then
    QUERY and that name, its first token scored POINTED and the rest 1; its control, the same
    with no mark. The asked-for name is each of the row's names about as often, by its place in
    the context and in the list: only the mark tells which (a model that copies the list's
    first or last name, or the context's, would not be paid)."""
    tok = {"byte": ByteTokenizer(), "bpe": bpe, "identifiers": bpe_identifiers}[tokenizer]
    length = 640 if tokenizer == "byte" else 256
    rng, places = np.random.default_rng(2), collections.Counter()
    for _ in range(40):
        state = rng.bit_generator.state
        tokens, scored = copy_words.word_row(tok, rng, pool, 16, length, ask="marked")
        rng.bit_generator.state = state
        context, names = copy_words.word_parts(rng, pool, 16)
        ids, text = tokens.tolist(), tok.decode(tokens.tolist())
        (asked,) = re.findall(r"`(\w+)`", text)  # one mark, on one of the row's names
        assert asked in names and text.rstrip().endswith(f"{copy_words.QUERY} {asked}.")
        places[("list", names.index(asked))] += 1
        places[("context", [w for w in context if w in names].index(asked))] += 1
        at, name_ids = asked_span(tok, ids, asked)
        first = copy_words.first_name_token(tok, name_ids)
        assert ids[at : at + len(name_ids)] == name_ids
        rest = [1] * (len(name_ids) - first - 1)
        assert scored[at:].tolist()[: len(name_ids) + 1] == [0] * first + [2, *rest, 0]
        assert np.flatnonzero(scored == copy_words.POINTED).tolist() == [at + first]
        if tokenizer != "bpe":  # the mark's next id is the name's first: a pointer copies it
            opening = next(j for j in range(at) if "`" in tok.decode([ids[j]]))
            assert ids[opening + 1] == ids[at + first]
        rng.bit_generator.state = state
        plain, plain_scored = copy_words.word_row(tok, rng, pool, 16, length, ask="unmarked")
        assert "`" not in tok.decode(plain.tolist())
        assert (plain_scored == copy_words.POINTED).sum() == 1
    assert all(3 <= places[(where, k)] for where in ("list", "context") for k in range(4)), places
    with pytest.raises(ValueError, match="absent has none"):
        copy_words.word_row(tok, rng, pool, 16, length, absent=True, ask="marked")


def test_lm_batch_scores_every_nonzero_mark(pool, bpe_identifiers):
    """A mention row's POINTED tokens are trained on like its copies (loss_mask > 0), and the
    table's pointer column reads those alone."""
    tokens, scored = copy_words.word_row(
        bpe_identifiers, np.random.default_rng(0), pool, 16, 256, ask="marked"
    )
    tokens, scored = tokens[None], scored[None]
    assert (bench_copy.lm_batch(tokens, scored)["loss_mask"] == (scored[:, 1:] > 0)).all()
    pointed = bench_copy.lm_batch(tokens, scored == copy_words.POINTED)
    assert pointed["loss_mask"].sum() == 1
    (at,) = np.flatnonzero(pointed["loss_mask"][0])
    assert scored[0, at + 1] == copy_words.POINTED  # targets are tokens[:, 1:]


def test_rows_that_cannot_fit_name_the_flags(pool):
    with pytest.raises(ValueError, match="fewer --words or a longer --half"):
        copy_words.word_row(ByteTokenizer(), np.random.default_rng(0), pool, 24, 64)


def test_word_drills_are_the_rows_in_chat_form_and_seeded(tmp_path, pool):
    path = bench_copy.write_drills(str(tmp_path / "a.jsonl"), 5, 64, 0, pool=pool, words=16)
    again = bench_copy.write_drills(str(tmp_path / "b.jsonl"), 5, 64, 0, pool=pool, words=16)
    assert open(path).read() == open(again).read()
    docs = [json.loads(x) for x in open(path)]
    rng = np.random.default_rng([0, 1])  # write_drills' stream
    for doc in docs:
        context, names = copy_words.word_parts(rng, pool, 16)
        user, assistant = (m["content"] for m in doc["messages"])
        assert user == " ".join(context) and assistant == " ".join(names)
        assert all(f" {n} " in f" {user} " for n in names)
    mention = bench_copy.write_drills(str(tmp_path / "m.jsonl"), 5, 64, 0, pool, 16, ask=True)
    for line in open(mention):
        user, assistant = (m["content"] for m in json.loads(line)["messages"])
        (asked,) = re.findall(r"`(\w+)`", user)
        assert assistant.endswith(f"{copy_words.QUERY} {asked}.")
    letters = bench_copy.write_drills(str(tmp_path / "c.jsonl"), 5, 64, 0)
    assert json.loads(open(letters).readline())["messages"][1]["content"].islower()


def test_rl_repos_drill_task_words_mixes_word_drills(tmp_path):
    """bench_rl_repos.py --sft_drills 0.25 --sft_drill_task words (rl_stages.drill_mix): 20,000
    drills of the training repositories' words at a quarter of the SFT rows."""
    from bench.rl_stages import drill_mix

    ((name, path, share),) = drill_mix(str(tmp_path), 0.25, "words")
    assert (name, share) == ("copy_drills", 0.25) and path.endswith("drills_words.jsonl")
    docs = [json.loads(x) for x in open(path)]
    words, _ = word_pool(vocabulary.training_files())
    names = docs[0]["messages"][1]["content"].split()
    assert len(docs) == 20_000 and len(names) == copy_words.NAMES
    assert all(set(n.split("_")) <= set(words) for n in names)
    assert drill_mix(str(tmp_path), 0.0, "words") == ()
    ((_, mention, _),) = drill_mix(str(tmp_path), 0.25, "mention")
    user, assistant = (m["content"] for m in json.loads(open(mention).readline())["messages"])
    (asked,) = re.findall(r"`(\w+)`", user)
    assert assistant.endswith(f"{copy_words.QUERY} {asked}.")
