"""Token lengths of real-repository episodes: prompts, tool outputs, whole scripted episodes.

    python bench/measure_repo_lengths.py          # the 65-task suite (data/repos/suite.jsonl)
    python bench/measure_repo_lengths.py --tiny   # 2 tasks (seconds)
    python bench/measure_repo_lengths.py --tokenizer hf:PATH --budgets 512,2048 --json out.json

Each suite task is played in the sandbox by an engineer's scripted plan, the tools RL gives the
mined tasks (CodingEnv, the system prompt with the search tools): list_files, run_tests, search
for the function the statement names, code_search on the statement's words, read the file that
holds the change, edit it (the reference fix), run_tests again, submit. Observations are taken
untrimmed (obs_token_budget far above any output) and measured with the tokenizer RL uses (the
byte tokenizer unless --tokenizer names another); each budget B then re-renders every episode
with data/chat.py's trim (the one function RL, SFT, eval and serving use) to show what a
B-token trim costs: how many outputs it cuts and the episode lengths after it.

Commands' outputs (run_tests) are as the sandbox captures them in every path: at most
Limits.output_bytes (32 KiB: head and tail, a note of the bytes omitted), so their max is that
cap, not the test run's whole output.

Prints one markdown table (p50 / p90 / max per quantity) and, with --json, the raw numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data.chat import tool_call_text, trim_tool_output  # noqa: E402
from data.tokenizers import load_tokenizer  # noqa: E402
from rl.envs import CodingEnv, require_isolation, run_episode  # noqa: E402
from rl.envs.agent.scripted import minimal_edit, named_symbol  # noqa: E402

UNTRIMMED = 1 << 30  # an observation budget (and a context) no output or episode reaches
TOOLS = ("list_files", "run_tests", "search", "code_search", "read_file", "edit", "submit")


def engineer_plan(task) -> list[tuple[str, dict]]:
    """(tool, arguments) per turn: how an engineer works a mined bug (module docstring)."""
    plan = [("list_files", {}), ("run_tests", {})]
    name = named_symbol(task)
    if name:
        plan.append(("search", {"pattern": rf"\b{name}\b"}))
    words = re.findall(r"[A-Za-z_]\w{2,}", task.prompt)[:8]
    if words:
        plan.append(("code_search", {"query": " ".join(words)}))
    for path, new in task.solution.items():
        old = task.files.get(path)
        plan.append(("read_file", {"path": path}))
        edit = minimal_edit(old, new) if old is not None and new is not None else None
        if edit:
            plan.append(("edit", {"path": path, "old": edit[0], "new": edit[1]}))
        elif new is not None:
            plan.append(("write_file", {"path": path, "content": new}))
    return plan + [("run_tests", {}), ("submit", {})]


def play(tok, task) -> dict:
    """One untrimmed episode -> {prompt, outputs: [(tool, text)], turns: [ids], passed}."""
    plan = engineer_plan(task)
    turns = [
        tok.encode(tool_call_text(n, a), allow_special=True) + [tok.special_id("end")]
        for n, a in plan
    ]
    queue = list(turns)
    env = CodingEnv(tok, obs_token_budget=UNTRIMMED, max_tokens=UNTRIMMED)
    rec = run_episode(env, task, lambda ctx: queue.pop(0))
    open_, close = tok.special_id("tool_result"), tok.special_id("/tool_result")
    outputs = []
    spans = rec.turn_spans + [(len(rec.tokens), None)]
    for (name, _), (_, end), (nxt, _) in zip(plan, spans, spans[1:]):
        obs = rec.tokens[end:nxt]
        if open_ in obs:
            outputs.append((name, tok.decode(obs[obs.index(open_) + 1 : obs.index(close)])))
    return dict(
        task=task.id,
        prompt=rec.prompt_len,
        outputs=outputs,
        turn_tokens=sum(len(t) for t in turns[: len(rec.turn_spans)]),
        episode=len(rec.tokens),
        done=rec.done_reason,
        passed=rec.all_pass,
    )


def episode_at(tok, ep: dict, budget: int) -> int:
    """The episode's length had every output been trimmed to `budget` tokens."""
    out = ep["episode"]
    for _, text in ep["outputs"]:
        out += len(tok.encode(trim_tool_output(tok, text, budget))) - len(tok.encode(text))
    return out


def table(tok, episodes: list[dict], budgets: list[int]) -> tuple[str, dict]:
    rows: dict[str, list[int]] = {"prompt (system + statement)": [e["prompt"] for e in episodes]}
    for tool in TOOLS + ("write_file",):
        n = [len(tok.encode(t)) for e in episodes for name, t in e["outputs"] if name == tool]
        if n:
            rows[f"output: {tool}"] = n
    rows["episode, untrimmed"] = [e["episode"] for e in episodes]
    cut = {}
    for b in budgets:
        rows[f"episode, outputs trimmed to {b}"] = [episode_at(tok, e, b) for e in episodes]
        every = [len(tok.encode(t)) for e in episodes for _, t in e["outputs"]]
        cut[b] = (sum(n > b for n in every), len(every))
    lines = ["| quantity (tokens) | n | p50 | p90 | max |", "|---|---|---|---|---|"]
    for k, v in rows.items():
        p50, p90 = np.percentile(v, [50, 90])
        lines.append(f"| {k} | {len(v)} | {p50:.0f} | {p90:.0f} | {max(v)} |")
    for b, (n, total) in cut.items():
        lines.append(f"\noutputs over {b} tokens (cut by the trim): {n} of {total}")
    return "\n".join(lines), rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="2 tasks (seconds)")
    p.add_argument("--limit", type=int, default=0, help="first N suite tasks (0 = all)")
    p.add_argument("--projects", default="", help="comma-separated project names (default all)")
    p.add_argument("--tokenizer", default="byte", help="data.tokenizers.load_tokenizer spec")
    p.add_argument("--budgets", default="512,2048", help="trim budgets to re-render at")
    p.add_argument("--json", default="", help="write the raw numbers here")
    p.add_argument("--workers", type=int, default=2, help="episodes played at once")
    a = p.parse_args(argv)
    from rl.envs.repos.projects import suite_tasks

    require_isolation()
    tok = load_tokenizer(a.tokenizer)
    projects = tuple(x for x in a.projects.split(",") if x)
    tasks = suite_tasks(projects, limit=2 if a.tiny else a.limit)
    budgets = [int(b) for b in a.budgets.split(",") if b]
    episodes = []
    with ThreadPoolExecutor(a.workers) as pool:  # sandbox commands overlap; order is kept
        for ep in pool.map(lambda t: play(tok, t), tasks):
            episodes.append(ep)
            print(f"{ep['task']}: {ep['episode']} tokens, {ep['done']}, passed {ep['passed']}")
    text, rows = table(tok, episodes, budgets)
    solved = sum(e["passed"] and e["done"] == "submit" for e in episodes)
    print(f"\n{len(episodes)} tasks, tokenizer {a.tokenizer}, scripted plan solved {solved}\n")
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(rows=rows, solved=solved, tasks=[e["task"] for e in episodes]), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
