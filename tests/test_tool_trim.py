"""One trim for long tool outputs (data/chat.py trim_tool_output): its round-trip properties on the
byte tokenizer and a BPE, and that the environment's observation (RL, eval, traces, the agent
command), an SFT row (render_messages / DataConfig.tool_output_budget) and the server's prompt
(rl/serve/protocol.py chat_request) put the same ids into the context for one long output."""

import os
import random
import re

import pytest

from data.chat import cut_note, render_messages, tool_call_text, trim_tool_output
from data.packing import tokenize_document
from data.sources import Document
from data.tokenizers import ByteTokenizer, load_tokenizer
from rl.envs import CodingEnv, Task
from rl.envs.agent import tools
from rl.serve import protocol as pr

TOK = ByteTokenizer()
BPE_PATH = os.path.join(os.path.dirname(__file__), "fixtures", "data", "tokenizer.json")
NOTE = re.compile(r"\n\[\.\.\. (\d+) characters cut \.\.\.\]\n")


def _texts(seed: int, n: int):
    rng = random.Random(seed)
    alphabet = "abc xyz\n\t()é漢🙂\\\"'"
    for _ in range(n):
        size = rng.choice([0, 1, 5, 50, 400, 3000, 20_000])
        yield "".join(rng.choice(alphabet) for _ in range(size))


def _split(text: str, out: str) -> tuple[str, int, str]:
    """(head, n, tail) of a trimmed output: the last note in it is the trim's (the head and
    tail are the text's own, and the text may hold note-like lines)."""
    m = list(NOTE.finditer(out))[-1] if out != text else None
    assert m is not None
    return out[: m.start()], int(m.group(1)), out[m.end() :]


@pytest.mark.parametrize("tok_name", ["byte", "bpe"])
def test_trim_round_trip_properties(tok_name):
    tok = TOK if tok_name == "byte" else load_tokenizer(f"hf:{BPE_PATH}")
    for text in _texts(seed=3, n=40 if tok_name == "byte" else 20):
        for budget in (40, 100, 300):
            out = trim_tool_output(tok, text, budget)
            assert len(tok.encode(out)) <= budget
            assert trim_tool_output(tok, out, budget) == out  # trimming twice changes nothing
            if len(tok.encode(text)) <= budget:
                assert out == text  # what fits is left as it is
                continue
            head, n, tail = _split(text, out)
            # The head and the tail are the text's own, and the note counts what lies between.
            assert text.startswith(head) and text.endswith(tail)
            assert n == len(text) - len(head) - len(tail) > 0
            assert out == head + cut_note(n) + tail
            # Not a stingy cut: both ends keep a fair share of the room.
            assert min(len(tok.encode(head)), len(tok.encode(tail))) >= (budget - 40) // 4


def test_trim_of_a_huge_output_is_cheap_and_exact():
    huge = "a" * 5_000_000 + "END"
    out = trim_tool_output(TOK, huge, 100)
    head, n, tail = _split(huge, out)
    assert len(TOK.encode(out)) <= 100 and tail.endswith("END")
    assert n == len(huge) - len(head) - len(tail)
    # Undecodable bytes (surrogate escapes) become U+FFFD, one per byte here.
    assert trim_tool_output(TOK, "x\udcff" * 3, 50) == "x\ufffd" * 3
    with pytest.raises(ValueError, match="budget=0"):
        trim_tool_output(TOK, "x", 0)


BUDGET = 120
LONG = "".join(f"line {i}: {'é' if i % 7 else 'x'} value = {i * i}\n" for i in range(200))


def _env_observation() -> list[int]:
    """The ids the environment appends after a read_file of the long file (RL's observation)."""
    task = Task(
        "trim-env",
        "Read long.txt.",
        {"long.txt": LONG},
        hidden_tests={"test_t.py": "def test_t():\n    assert True\n"},
        solution={},
    )
    env = CodingEnv(TOK, obs_token_budget=BUDGET)
    env.reset(task)
    try:
        turn = TOK.encode(tool_call_text("read_file", {"path": "long.txt"}), allow_special=True)
        obs, done = env.step(turn + [TOK.special_id("end")])
    finally:
        env.close()
    assert not done
    return obs[:-1]  # without the closing "<|assistant|>"


def test_one_long_output_renders_identically_in_rl_sft_and_serving():
    env_ids = _env_observation()
    expected = TOK.encode(trim_tool_output(TOK, LONG, BUDGET))
    assert "characters cut" in TOK.decode(env_ids)
    # RL / eval / traces / the agent command: the environment's observation.
    tool_message = (
        [TOK.special_id("tool"), TOK.special_id("tool_result")]
        + expected
        + [TOK.special_id("/tool_result"), TOK.special_id("end")]
    )
    assert env_ids == tool_message
    assert tools.truncate_to_budget(TOK, LONG, BUDGET) == expected
    # SFT: a trace holding the raw output, rendered by the pipeline with the same budget; a trace
    # holding the already trimmed text renders to the same ids.
    call = {"name": "read_file", "arguments": {"path": "long.txt"}}
    raw = [
        {"role": "user", "content": "Read long.txt."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": LONG},
    ]
    doc = tokenize_document(TOK, Document(raw, "t.jsonl:1"), tool_budget=BUDGET)
    sft_ids = [int(i) for i in doc["ids"]]
    assert sft_ids[-len(tool_message) :] == tool_message
    trimmed = raw[:2] + [{"role": "tool", "content": TOK.decode(expected)}]
    assert render_messages(TOK, trimmed, tool_budget=BUDGET)[0] == sft_ids
    # Serving: an OpenAI chat request carrying the raw output as a tool message.
    body = {
        "model": "m",
        "messages": [
            raw[0],
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "long.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c0", "content": LONG},
        ],
    }
    req = pr.chat_request(TOK, body, max_new_default=8, temperature=0.0, tool_budget=BUDGET)
    assert req.prompt[-len(tool_message) - 1 : -1] == tool_message
    assert req.prompt[:-1] == sft_ids  # the whole context, not only the tool message
    # Budget 0 (the default everywhere but configs): as written.
    untrimmed = pr.chat_request(TOK, body, max_new_default=8, temperature=0.0)
    assert TOK.decode(untrimmed.prompt).count("line 199") == 1 and len(untrimmed.prompt) > len(
        req.prompt
    )


def test_length_bench_measures_untrimmed_outputs_and_trimmed_episodes():
    """bench/measure_repo_lengths.py on a one-file task: the outputs it measures are the tools'
    whole texts (read_file gives the file back exactly), and an episode re-rendered at a budget is
    as long as playing it with that budget."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench")
    spec = importlib.util.spec_from_file_location(
        "measure_repo_lengths", os.path.join(path, "measure_repo_lengths.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    body = f'"""{LONG}"""\n\n\ndef total(xs):\n    return sum(xs) + 1\n'
    task = Task(
        "len-bench",
        "`total` is off by one.",
        {"m.py": body},
        hidden_tests={
            "test_m.py": "from m import total\n\ndef test_t():\n    assert total([1]) == 1\n"
        },
        solution={"m.py": body.replace("sum(xs) + 1", "sum(xs)")},
        meta={"tools": ["search", "code_search"]},
    )
    ep = bench.play(TOK, task)
    names = [n for n, _ in ep["outputs"]]
    assert names == ["list_files", "run_tests", "search", "code_search", "read_file", "edit",
                     "run_tests"]  # fmt: skip
    assert dict(ep["outputs"])["read_file"] == body and ep["passed"] and ep["done"] == "submit"
    assert bench.episode_at(TOK, ep, bench.UNTRIMMED) == ep["episode"]
    trimmed = CodingEnv(TOK, obs_token_budget=BUDGET)
    plan = [
        TOK.encode(tool_call_text(n, a), allow_special=True) + [TOK.special_id("end")]
        for n, a in bench.engineer_plan(task)
    ]
    from rl.envs import run_episode

    rec = run_episode(trimmed, task, lambda ctx: plan.pop(0))
    assert bench.episode_at(TOK, ep, BUDGET) == len(rec.tokens) < ep["episode"]
