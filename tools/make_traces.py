"""Generates data/traces/coding_traces.jsonl: SFT traces played through the RL environment itself.

    python tools/make_traces.py                  # rewrites the file (~10 min on a busy 2-core box)

Each trace is one episode of rl.envs.CodingEnv on a procedurally generated task (rl/envs/taskgen,
the same tasks RL trains on), played by the scripted oracle rl.envs.scripted.TracePolicy: the same
tools (list_files, read_file, edit, write_file, run, run_tests, submit), the same system prompt and
the same chat template as RL. Tool results are the environment's real observations (sandboxed
commands, truncation included). A trace is kept only if the episode ends in `submit`, has no
malformed call, passes every hidden test, and its chat messages render (data/chat.py) to exactly the
episode's token ids, so SFT trains on the token sequences the environment produces. Output is
deterministic: the environment masks the durations pytest prints ("3 passed in X.XXs").

Fields: id, task (task id), template, seed, difficulty (regenerate the task with
rl.envs.generate_task(template, seed, difficulty)), flow ("direct" | "reproduce"), mistake (None,
or which one-byte mistake the trace shows and recovers from: rl.envs.scripted.MISTAKES; the shipped
file has none, bench/bench_rl_coding.py --mistake_rate makes them), grade [passed, total], messages
(a mistaken assistant turn carries "weight": 0: in the context, not in the loss).
"""

from __future__ import annotations

import json
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repo root, when run as a script
# A tool, not part of data/: it plays the RL environment (rl/), and data/ never imports rl/.

from data.chat import render_messages  # noqa: E402
from data.tokenizers import ByteTokenizer, Tokenizer  # noqa: E402
from rl.envs import TEMPLATES, CodingEnv, generate_task, run_episode  # noqa: E402
from rl.envs.env import DEFAULT_SYSTEM  # noqa: E402
from rl.envs.scripted import TracePolicy  # noqa: E402

OUT_PATH = os.path.join(ROOT, "data", "traces", "coding_traces.jsonl")
NUM_TRACES = 312  # 12 templates x 26
SEED = 0


def record_to_messages(tok: Tokenizer, rec, plan, prompt: str) -> list[dict]:
    """Chat messages for an episode: the plan's turns + the observations found in the record."""
    messages = [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": prompt}]
    tool, open_, close = (tok.special_id(n) for n in ("tool", "tool_result", "/tool_result"))
    spans = rec.turn_spans + [(len(rec.tokens), None)]
    for (text, name, args, trained), (_, end), (nxt, _) in zip(plan, spans, spans[1:]):
        call = {"name": name, "arguments": args}
        message = {"role": "assistant", "content": text, "tool_calls": [call]}
        messages.append(message if trained else dict(message, weight=0))
        obs = rec.tokens[end : max(nxt - 1, end)]  # without the closing "<|assistant|>"
        i = 0
        while i < len(obs):
            assert obs[i : i + 2] == [tool, open_], "observation is not a tool message"
            j = obs.index(close, i)
            messages.append({"role": "tool", "content": tok.decode(obs[i + 2 : j])})
            i = j + 2  # past "<|/tool_result|><|end|>"
    return messages


def make_trace(n: int) -> dict | None:
    """Trace n of the shipped file: template n % 12, difficulty cycling 1-3, seed n."""
    rng = random.Random(SEED * 100_003 + n)
    templates = sorted(TEMPLATES)
    template, difficulty = templates[n % len(templates)], 1 + (n // len(templates)) % 3
    task = generate_task(template, seed=SEED * 100_003 + n, difficulty=difficulty)
    return task_trace(task, rng, f"coding-{n:04d}")


def task_trace(task, rng: random.Random, trace_id: str, mistake_rate: float = 0.0) -> dict | None:
    """One scripted-oracle episode of `task` as an SFT trace, or None (printed) when the oracle's
    episode does not end in a clean, all-passing submit. With `mistake_rate` > 0 some traces hold
    one mistake and its recovery (TracePolicy); the mistaken turn has "weight": 0."""
    tok = ByteTokenizer()
    policy = TracePolicy(tok, task, rng, mistake_rate)
    rec = run_episode(CodingEnv(tok), task, policy)
    messages = record_to_messages(tok, rec, policy.plan, task.prompt)
    errors = sum(m["role"] == "tool" and m["content"].startswith("error:") for m in messages)
    if (
        rec.done_reason != "submit"
        or rec.malformed_calls
        or not rec.all_pass
        or errors != (1 if policy.mistake else 0)  # the planned mistake's, and no other
    ):
        print(f"skipped {task.id}: {rec.done_reason}, {rec.tests_passed}/{rec.tests_total} passed")
        return None
    assert render_messages(tok, messages)[0] == rec.tokens, f"{task.id}: render != episode ids"
    return {
        "id": trace_id,
        "task": task.id,
        "template": task.meta["template"],
        "seed": task.seed,
        "difficulty": task.difficulty,
        "flow": policy.flow,
        "mistake": policy.mistake,
        "grade": [rec.tests_passed, rec.tests_total],
        "messages": messages,
    }


def main() -> None:
    with ThreadPoolExecutor(2) as pool:  # sandboxed commands are subprocesses: threads overlap them
        traces = [t for t in pool.map(make_trace, range(NUM_TRACES)) if t is not None]
    with open(OUT_PATH, "w") as f:
        for trace in traces:
            f.write(json.dumps(trace, ensure_ascii=False) + "\n")
    print(f"wrote {len(traces)} traces, {os.path.getsize(OUT_PATH) / 1e6:.2f} MB, to {OUT_PATH}")


if __name__ == "__main__":
    main()
