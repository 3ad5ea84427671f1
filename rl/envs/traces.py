"""Generates data/traces/coding_traces.jsonl: SFT traces played through the RL environment itself.

    python -m rl.envs.traces                 # rewrites the file (~10 min on a busy 2-core box)
    python -m rl.envs.traces --summary       # rewrites data/traces/summary_traces.jsonl
    python -m rl.envs.traces --tools         # rewrites data/traces/tool_traces.jsonl

In rl/envs/ (not data/): it plays the RL environment, and data/ never imports rl/. Benchmarks and
tests import its functions (task_trace, make_trace, chain_traces).

Each trace is one episode of rl.envs.CodingEnv on a procedurally generated task (rl/envs/taskgen,
the same tasks RL trains on), played by the scripted oracle rl.envs.agent.scripted.TracePolicy: the
same tools (list_files, read_file, edit, write_file, run, run_tests, submit), the same system prompt
and the same chat template as RL. Tool results are the environment's real observations (sandboxed
commands, truncation included). A trace is kept only if the episode ends in `submit`, has no
malformed call, passes every hidden test, and its chat messages render (data/chat.py) to exactly the
episode's token ids, so SFT trains on the token sequences the environment produces. Output is
deterministic: the environment masks the durations pytest prints ("3 passed in X.XXs").

Fields: id, task (task id), template, seed, difficulty (regenerate the task with
rl.envs.generate_task(template, seed, difficulty)), flow ("direct" | "reproduce"), mistake (None,
or which one-byte mistake the trace shows and recovers from: rl.envs.agent.scripted.MISTAKES; the
shipped file has none, bench/bench_rl_coding.py --mistake_rate makes them), grade [passed, total],
messages (a mistaken assistant turn carries "weight": 0: in the context, not in the loss).

Summary traces (data/traces/summary_traces.jsonl, `--summary`): long_lookup tasks (the fix needs
more context than the budget) played at a 2,560-token context with self-summarization
(rl/envs/agent/summary.py) by the summarizing oracle; every segment of the chain is one trace
(fields chain, segment, segments besides the above): it ends with the trained summary turn (an
assistant message {"summary": text}), and the next segment's trace starts from the rebuilt context
(the summary copied with "weight": 0, then the environment's continue note), so SFT teaches both
writing a summary when asked and working from one.

Tool traces (data/traces/tool_traces.jsonl, `--tools`): the training templates and the review and
DevOps families (rl.envs.taskgen.TOOL_FAMILY_TEMPLATES) with the search tools switched on
(`with_search`: Task.meta["tools"] gains search and code_search, so the system prompt lists them),
played by the same oracle, which then searches for the function the statement names (or runs a
ranked code search on its words) before opening files (rl.envs.agent.scripted.locate) and, on review
tasks, reports the defect with `report`. Same fields and checks as the coding traces, plus
`tools` (the task's extra tools: regenerate with with_search(generate_task(...)); review_patch's
own report first). A DevOps task gets its baseline test set from the reference solution first
(rl.envs.grading.grade_devops.baseline_of, as the gate takes it): its grade needs one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

from data.chat import render_messages, summary_ids
from data.tokenizers import ByteTokenizer, Tokenizer
from rl.envs import TEMPLATES, CodingEnv, generate_task, run_episode
from rl.envs.agent import tools
from rl.envs.agent.env import DEFAULT_SYSTEM
from rl.envs.agent.scripted import SummarizingPolicy, TracePolicy
from rl.envs.agent.summary import SummaryConfig
from rl.envs.grading.grade_devops import baseline_of
from rl.envs.taskgen import TOOL_FAMILY_TEMPLATES, training_templates

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo
OUT_PATH = os.path.join(ROOT, "data", "traces", "coding_traces.jsonl")
SUMMARY_PATH = os.path.join(ROOT, "data", "traces", "summary_traces.jsonl")
NUM_SUMMARY_CHAINS = 24  # long_lookup, difficulty cycling 1-3
SUMMARY_BUDGET, SUMMARY = 2560, SummaryConfig(trigger_tokens=1500, max_segments=6)
NUM_TRACES = 312  # 12 templates x 26
SEED = 0
TOOL_PATH = os.path.join(ROOT, "data", "traces", "tool_traces.jsonl")
TOOL_TEMPLATES = tuple(training_templates()) + tuple(sorted(TOOL_FAMILY_TEMPLATES))  # 10 + 5
NUM_TOOL_TRACES = 3 * len(TOOL_TEMPLATES)  # each template at difficulty 1, 2, 3
TOOL_SEED = 1  # task seeds apart from the coding traces'
SEARCH_TOOLS = ("search", "code_search")


def system_prompt(task) -> str:
    """The environment's system prompt for `task` (CodingEnv.reset: extra tools' help lines)."""
    return DEFAULT_SYSTEM + tools.extra_help(task.meta.get("tools", ()))


def record_to_messages(tok: Tokenizer, rec, plan, prompt: str, system: str = DEFAULT_SYSTEM):
    """Chat messages for an episode: the plan's turns + the observations found in the record."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
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
    messages = record_to_messages(tok, rec, policy.plan, task.prompt, system_prompt(task))
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
        **({"tools": list(task.meta["tools"])} if task.meta.get("tools") else {}),
        "messages": messages,
    }


def with_search(task):
    """`task` with the search tools switched on (besides any it has, e.g. review's report)."""
    have = list(task.meta.get("tools", ()))
    return dataclasses.replace(
        task, meta={**task.meta, "tools": have + [t for t in SEARCH_TOOLS if t not in have]}
    )


def make_tool_trace(n: int) -> dict | None:
    """Tool trace n: template n % 15 of TOOL_TEMPLATES, difficulty cycling 1-3, search tools on."""
    seed = TOOL_SEED * 100_003 + n
    template = TOOL_TEMPLATES[n % len(TOOL_TEMPLATES)]
    difficulty = 1 + (n // len(TOOL_TEMPLATES)) % 3
    task = with_search(generate_task(template, seed=seed, difficulty=difficulty))
    if task.meta.get("grader") == "devops":  # its grade needs the gate's baseline test set
        task.meta["devops"]["baseline"] = sorted(baseline_of(task))
    return task_trace(task, random.Random(seed), f"tools-{n:04d}")


def ids_to_messages(tok: Tokenizer, ids: list[int]) -> list[dict]:
    """Chat messages of a run of rendered messages (data/chat.py; no <|bos|>): the inverse of
    render_messages for the roles, tool results, tool calls and summaries the environment makes."""
    roles = {tok.special_id(r): r for r in ("system", "user", "assistant", "tool")}
    end, call, end_call = (tok.special_id(n) for n in ("end", "tool_call", "/tool_call"))
    messages, i = [], 0
    while i < len(ids):
        role, j = roles[ids[i]], ids.index(end, i + 1)
        body, i = ids[i + 1 : j], j + 1
        if role == "tool":
            messages.append({"role": "tool", "content": tok.decode(body[1:-1])})
        elif role == "assistant" and body[:1] == summary_ids(tok, "")[:1]:
            messages.append({"role": "assistant", "summary": tok.decode(body[1:-1])})
        elif role == "assistant":
            cut = body.index(call) if call in body else len(body)
            calls, rest = [], body[cut:]
            while rest:
                k = rest.index(end_call)
                calls.append(json.loads(tok.decode(rest[1:k])))
                rest = rest[k + 1 :]
            message = {"role": "assistant", "content": tok.decode(body[:cut])}
            messages.append(dict(message, tool_calls=calls) if calls else message)
        else:
            messages.append({"role": role, "content": tok.decode(body)})
    return messages


def segment_messages(tok: Tokenizer, segment: dict) -> list[dict]:
    """One segment of an episode (rl.episodes.schema.EpisodeRecord.all_segments()) as chat
    messages that render to exactly its ids and mask: assistant messages of the rebuilt prompt
    (the copied summary) get "weight": 0."""
    tokens, prompt_len = segment["tokens"], segment["prompt_len"]
    messages, seen = [], 1
    for m in ids_to_messages(tok, tokens[1:]):
        n = len(render_messages(tok, [m])[0]) - 1  # its ids without <|bos|>
        in_prompt = seen + n <= prompt_len
        messages.append(dict(m, weight=0) if in_prompt and m["role"] == "assistant" else m)
        seen += n
    return messages


def chain_traces(task, rng: random.Random, chain: int) -> list[dict] | None:
    """The summarizing oracle's episode of `task` at SUMMARY_BUDGET: one trace per segment, or
    None (printed) when it does not end in a clean, all-passing submit after a summary."""
    tok = ByteTokenizer()
    policy = SummarizingPolicy(tok, TracePolicy(tok, task, rng), task)
    env = CodingEnv(tok, max_tokens=SUMMARY_BUDGET, summary=SUMMARY, max_turns=40)
    rec = run_episode(env, task, policy)
    if rec.done_reason != "submit" or rec.malformed_calls or not rec.all_pass or not rec.summaries:
        print(f"skipped {task.id}: {rec.done_reason}, {rec.summaries} summaries")
        return None
    out = []
    for k, segment in enumerate(rec.all_segments()):
        messages = segment_messages(tok, segment)
        ids, mask = render_messages(tok, messages)
        assert (ids, mask) == (segment["tokens"], segment["mask"]), f"{task.id}: segment {k}"
        out.append(
            {
                "id": f"summary-{chain:04d}-s{k}",
                "task": task.id,
                "template": task.meta["template"],
                "seed": task.seed,
                "difficulty": task.difficulty,
                "chain": chain,
                "segment": k,
                "segments": len(rec.segments) + 1,
                "grade": [rec.tests_passed, rec.tests_total],
                "messages": messages,
            }
        )
    return out


def make_chain(n: int) -> list[dict] | None:
    rng = random.Random(SEED * 100_003 + n)
    task = generate_task("long_lookup", seed=SEED * 100_003 + n, difficulty=1 + n % 3)
    return chain_traces(task, rng, n)


def main() -> None:
    if "--tools" in sys.argv[1:]:
        with ThreadPoolExecutor(2) as pool:
            traces = [t for t in pool.map(make_tool_trace, range(NUM_TOOL_TRACES)) if t]
        with open(TOOL_PATH, "w") as f:
            for trace in traces:
                f.write(json.dumps(trace, ensure_ascii=False) + "\n")
        print(f"wrote {len(traces)} traces, {os.path.getsize(TOOL_PATH) / 1e6:.2f} MB")
        return
    if "--summary" in sys.argv[1:]:
        with ThreadPoolExecutor(2) as pool:
            chains = [c for c in pool.map(make_chain, range(NUM_SUMMARY_CHAINS)) if c]
        with open(SUMMARY_PATH, "w") as f:
            for trace in (t for c in chains for t in c):
                f.write(json.dumps(trace, ensure_ascii=False) + "\n")
        print(f"wrote {len(chains)} chains, {os.path.getsize(SUMMARY_PATH) / 1e6:.2f} MB")
        return
    with ThreadPoolExecutor(2) as pool:  # sandboxed commands are subprocesses: threads overlap them
        traces = [t for t in pool.map(make_trace, range(NUM_TRACES)) if t is not None]
    with open(OUT_PATH, "w") as f:
        for trace in traces:
            f.write(json.dumps(trace, ensure_ascii=False) + "\n")
    print(f"wrote {len(traces)} traces, {os.path.getsize(OUT_PATH) / 1e6:.2f} MB, to {OUT_PATH}")


if __name__ == "__main__":
    main()
