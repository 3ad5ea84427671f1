"""RL on real repositories, the whole path with one command (issue 52): training-repository tasks
-> expert traces -> SFT -> RL -> held-out evaluation before SFT, after SFT and after RL.

    python bench/bench_rl_repos.py [--init PARAMS] [--max_tokens 4096] [--traces FILE]
        [--new_traces 16] [--trace_minutes 5] [--sft_steps 80] [--sft_minutes 0]
        [--sft_turns 0] [--sft_renamed 0] [--sft_seed 0] [--sft_seq_len 0] [--sft_drills 0]
        [--sft_drill_task induction] [--sft_rename_words] [--sft_rename_match]
        [--sft_keep_played] [--code_bpe 0]
        [--code_bpe_pattern cl100k]
        [--rl_steps 40] [--rl_minutes 10] [--eval_every 0] [--heldout_sites 4]
        [--heldout_repos 4] [--k 4] [--workdir runs/bench_rl_repos] [--seeds 0,1]
    python bench/bench_rl_repos.py --tiny --seeds 0,1   # smoke: tiny, 1 SFT + 1 RL step

1. Tasks: data/repos/pool.jsonl's "train" bugfix/feature lines (gated tasks mined from the
   training repositories, rl.envs.repos.scale), written as a task file (rl/envs/grading/tasks.py)
   that the RL loop reads (rl.coding.tasks).
2. Expert traces: `--traces` (default the committed data/traces/repo_expert_traces.jsonl; a
   larger file from `python -m rl.envs.repo_traces`; training repositories only) plus
   `--new_traces` played now by the scripted expert (rl/envs/repo_traces.py expert_trace, in the
   sandbox, real grader) on recipes of 1., for at most `--trace_minutes`;
   traces longer than the context (`--max_tokens`) are left out and counted: the policy could
   never play them to the end.
3. SFT: bench/rl_stages.py's sft (train/'s loop, configs/sft.py's loss) from a random init of
   `--preset` with `--mtp_modules` MTP heads (trained by self-distillation) at context
   `--max_tokens`, for `--sft_steps` or `--sft_minutes` (0: no time bound). `--init PARAMS`
   starts it from an exported policy instead (e.g. bench_rl_coding's SFT, which already speaks
   the tool protocol on procedural tasks), its context YaRN-extended to `--max_tokens` when
   shorter (the long-context stage's rule; "before SFT" is then that policy). `--sft_turns N`
   trains on each trace cut after its N-th assistant turn, `--sft_renamed N` on N copies of each
   with the statement's symbols renamed afresh throughout (data/rename.py: names only copying
   can write; syllable words, or with `--sft_rename_words` the training repositories' identifier
   words; `--sft_rename_match`: in the old name's shape, as many words and lowerCamel kept, so
   one-word symbols get one-word names; `--sft_keep_played`: the trace as played beside its
   copies), `--sft_seq_len` sets shorter rows for such prefixes (rl_stages.sft_traces).
   `--sft_drills S` puts bench_copy.py's induction drills (find a name by its bytes, write it
   again: the content-addressed copy a statement's symbol needs) in that share of the rows;
   `--sft_drill_task words` makes them of code words (bench/copy_words.py), the drills that
   ask for the same copy under `--code_bpe`'s vocabulary (letter names merge with their filler);
   `mention` adds one backticked name asked for after the expert's "Searching for the
   definition of" (the pointer a first search needs).
   `--code_bpe N` learns a BPE vocabulary of N ids from the training repositories
   (rl/envs/repos/vocabulary.py, into --workdir) and runs every stage with it instead of the
   byte tokenizer: SFT rows, RL's samplers (data.tokenizer), held-out episodes and the probe;
   token counts, --max_tokens and --obs_token_budget are then in its tokens (~4 bytes each).
   `--code_bpe_pattern identifiers` learns it with a pre-tokenizer that cuts an identifier from
   what precedes it, so the statement's symbol is the same ids in the calls that name it.
4. RL: rl/learning/loop.py on the task file (one trainer, async sampler threads, groups of
   `--group_size`, single epoch, speculative samplers with `--spec_k` drafts and the MTP
   self-distillation term, rl.mtp_weight's default) for `--rl_steps` or `--rl_minutes`. With
   `--eval_every N` RL runs in chunks of N steps (the loop resumes from its workdir) and the held
   -out sets are played after each: the pass@1 / best-of-K vs RL steps curve.
5. Held-out sets: (a) sites: the committed suite's tasks (data/repos/suite.jsonl) in training
   repositories (held out by site: never mined into a pool), (b) repositories: the suite's and
   the pool's tasks of holdout.HELD_OUT_REPOS; `--heldout_sites` / `--heldout_repos` tasks each,
   projects interleaved. Each task is played `--k` times in the RL loop's sampler (bench/
   rl_stages.py play_heldout) before SFT (a random init of the same model), after SFT and after
   RL; metrics by rl.episodes.episode_metrics (pass@1, best-of-K, completion tokens, tool calls,
   malformed rate, endings) and eval/copy_rate.py (how often an `edit` copies the buggy line
   exactly from what the policy read; how often the first search names the symbol the
   statement names), the samplers' MTP acceptance, and eval/name_copy.py's teacher-forced probe
   (can the policy write the statement's symbol where the expert names it) on `--probe_traces`
   committed traces as trained and renamed afresh.

Overlap is checked before any model loads: no held-out task id in the traces or the RL pool, no
held-out repository among the training projects. Printed: a table (stage x set), the curves'
points, one row per RL seed, with wall times and the load; the PNG `--out` holds held-out pass@1
and best-of-K vs RL steps and the samplers' MTP acceptance vs RL steps. Every held-out episode's
transcript (ending, grade, its turns as text) is kept beside the metrics: --workdir's
eval_before_sft.jsonl, eval_after_sft.jsonl and RL's heldout_episodes.jsonl.
`--seeds S1,S2` repeats 4.-5. per rl.seed from the one SFT export (bench/common.py over_seeds).
Re-running reuses finished stages found in --workdir (task file, traces, the SFT export).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

from train.malloc_env import reexec_with_hugepages  # noqa: E402

reexec_with_hugepages()  # the default launch's allocator setting (main.py applies it too)

import jax  # noqa: E402

from bench import rl_stages  # noqa: E402
from bench.common import over_seeds, parse_seeds, parse_tiny, seeds_line  # noqa: E402
from bench.rl_stages import build, select  # noqa: E402
from data.code_bpe import PATTERNS  # noqa: E402
from rl.learning import loop  # noqa: E402

TRACES = os.path.join(ROOT, "data/traces/repo_expert_traces.jsonl")


def rename_pool(args) -> tuple | None:
    """--sft_rename_words: the training repositories' identifier words (data/rename.py
    word_pool) for the renamed copies' names; None: syllable names."""
    if not args.sft_rename_words:
        return None
    from data.rename import word_pool
    from rl.envs.repos.vocabulary import training_files

    return word_pool(training_files())


def make_traces(
    pool: list[dict], path: str, given: str, new: int, minutes: float, max_tokens: int, args, tok
) -> dict:
    """The SFT file: the expert traces in `given` + `new` played now on pool recipes (at most
    `minutes`), those within `max_tokens` of `tok` kept, then as args.sft_turns /
    args.sft_renamed say (rl_stages.sft_traces), those within the SFT rows (args.sft_seq_len)
    kept. -> counts."""
    from rl.envs import repo_traces
    from rl.envs.repos import mine as M

    if os.path.exists(path):
        return json.load(open(path + ".counts"))
    with open(given, encoding="utf-8") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    t0, outcomes = time.monotonic(), []
    for d in sorted(pool, key=lambda d: d["id"].rsplit("-", 1)[-1])[:new]:
        if time.monotonic() - t0 > 60 * minutes:
            break
        recipe = M.Recipe.from_dict({k: v for k, v in d.items() if k not in ("family", "split")})
        trace, outcome = repo_traces.expert_trace(recipe, k=0, mistake_rate=0.25)
        outcomes.append(outcome.split(":")[0])
        rows += [trace] if trace else []
    repo_traces.check_training_only(rows)  # no held-out repository or suite site
    rows = [dict(t, tokens=rl_stages.count_tokens(tok, t)) for t in rows]  # the run's tokens
    kept = [t for t in rows if t["tokens"] <= max_tokens]
    docs = rl_stages.sft_traces(
        kept,
        renamed=args.sft_renamed,
        turns=args.sft_turns,
        seed=args.sft_seed,
        tok=tok,
        pool=rename_pool(args),
        match=args.sft_rename_match,
        keep=args.sft_keep_played,
    )
    docs = [t for t in docs if t["tokens"] <= (args.sft_seq_len or max_tokens)]
    if not docs:
        raise ValueError(f"no expert trace fits --max_tokens={max_tokens} / --sft_seq_len")
    repo_traces.write_traces(path, docs)
    counts = dict(
        given=len(rows) - outcomes.count("solved"),
        played=len(outcomes),
        solved=outcomes.count("solved"),
        over_context=len(rows) - len(kept),
        kept=len(kept),
        documents=len(docs),
        tokens=sum(t["tokens"] for t in docs),
    )
    json.dump(counts, open(path + ".counts", "w"))
    return counts


def tokenizer_spec(args) -> str:
    """'byte', or with --code_bpe N 'hf:' a code BPE vocabulary of N ids learned from the
    training repositories (rl/envs/repos/vocabulary.py) in --workdir (once: a re-run reuses it)."""
    if not args.code_bpe:
        return "byte"
    from rl.envs.repos.vocabulary import write_vocabulary

    suffix = "" if args.code_bpe_pattern == "cl100k" else f"_{args.code_bpe_pattern}"
    path = os.path.join(args.workdir, f"code_bpe_{args.code_bpe}{suffix}.json")
    if not os.path.exists(path):
        write_vocabulary(args.code_bpe, path, pattern=args.code_bpe_pattern)
    return f"hf:{path}"


def rl_config_for(
    args, params_dir: str, tasks_path: str, pool_size: int, seed: int | None, tokenizer: str
):
    config = rl_stages.coding_rl_config(
        args,
        params_dir,
        seed,
        pool_size,
        # with MTP heads: rl.mtp_weight -1 -> the distillation term on
        rl=dict(speculative_k=args.spec_k, dynamic_sampling=bool(args.dynamic_sampling)),
        coding=dict(
            tasks=tasks_path,
            max_turns=args.max_turns,
            max_turn_tokens=args.max_turn_tokens,
            obs_token_budget=args.obs_token_budget,
        ),
    )
    config.data.tokenizer = tokenizer  # the samplers' too (rl_tasks' resolve)
    return config


def evaluate(
    config, params, sets: dict, k: int, seed: int, probe: dict, episodes: str = ""
) -> dict:
    """{set: metrics} of k episodes per task (every set's tasks in one play call, so one engine
    serves them): episode_metrics, copy_stats, and the samplers' MTP acceptance over all sets;
    the name-copy probe on `probe`'s rows (name_probe; the same figures in both sets).
    `episodes`: a JSONL path that gets every episode's transcript (what failed, to read)."""
    from data.tokenizers import load_tokenizer
    from eval.copy_rate import copy_stats, search_stats

    tok = load_tokenizer(config.data.tokenizer)
    probe = name_probe(config, params, probe)
    tasks = [t for s in sets.values() for t in s]
    groups, counters = rl_stages.play_heldout(config, params, tasks, k, seed)
    out, i, lines = {}, 0, []
    for name, these in sets.items():
        mine, i = groups[i : i + len(these)], i + len(these)
        m = rl_stages.heldout_metrics([t.id for t in these], mine, k)
        m.update(copy_stats(tok, [r for g in mine for r in g], these))
        m.update(search_stats(tok, [r for g in mine for r in g], these))
        m["spec/acceptance"] = counters.get("spec/acceptance", float("nan"))
        out[name] = dict(m, **probe)
        lines += [dict(set=name, **rl_stages.transcript(tok, r)) for g in mine for r in g]
    if episodes:
        with open(episodes + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
        os.replace(episodes + ".tmp", episodes)
    return out


def name_probe(config, params, rows: dict) -> dict:
    """eval/name_copy.py's probe per row set of rl_stages.name_probe_rows: {'names_exact/trained',
    'name_bytes/trained', 'name_first/trained', and the same of 'fresh'}."""
    from eval.name_copy import name_copy_probe

    cfg, out = loop.model_config(config), {}
    for label, these in rows.items():
        got = name_copy_probe(cfg, params, these, rl_stages.probe_len(cfg))
        key = label.split()[0]  # trained | fresh
        for figure in ("names_exact", "name_bytes", "name_first"):
            out[f"{figure}/{key}"] = got[figure]
    return out


def evaluate_once(path: str, config, params_fn, sets: dict, k: int, seed: int, probe: dict) -> dict:
    """evaluate, its result kept in `path` (JSON): a re-run after a later stage failed does not
    play a finished evaluation again; params_fn() gives the params only when needed."""
    if os.path.exists(path):
        return json.load(open(path))
    episodes = path[: -len(".json")] + ".jsonl"
    out = evaluate(config, params_fn(), sets, k, seed, probe, episodes=episodes)
    save_json(path, out)
    return out


def table(stages: dict, k: int) -> str:
    """Markdown rows: stage x set (best-of-4 and best-of-K when K > 4)."""
    bests = [4, k] if k > 4 else [k]
    head = (
        "| stage | set | tasks x K | pass@1 | "
        + "".join(f"best-of-{j} | " for j in bests)
        + "tokens | tool calls | malformed rate | copy rate (edits) | 1st search names the "
        "statement's symbol (searches) | name copied, teacher-forced: trained / fresh names, "
        "exact (share of its tokens; first token) (both sets) | MTP acceptance (both sets) | "
        "endings |\n" + "|---" * (12 + len(bests)) + "|"
    )
    rows = []
    for stage, sets in stages.items():
        for name, m in sets.items():
            n = m["episodes"]
            ends = {key[5:]: round(v * n) for key, v in m.items() if key.startswith("done/")}
            copy = "-" if m["copy_rate"] is None else f"{m['copy_rate']:.2f}"
            named = m.get("search_name_rate")  # None: no search; absent: a result saved before
            named = "-" if named is None else f"{named:.2f} ({m['searches']})"
            probe = " / ".join(  # absent: a result saved before the probe (or its first)
                f"{m[f'names_exact/{w}']:.2f} ({m[f'name_bytes/{w}']:.2f}"
                + (f"; {m[f'name_first/{w}']:.2f})" if f"name_first/{w}" in m else ")")
                for w in ("trained", "fresh")
                if f"names_exact/{w}" in m
            )
            rows.append(
                f"| {stage} | {name} | {m['tasks']} x {k} | {m['pass_rate']:.3f} | "
                + "".join(f"{m[f'best_of_{j}']:.3f} | " for j in bests)
                + f"{m['completion_tokens']:.0f} | "
                f"{m['tool_calls']:.2f} | {m['malformed_rate']:.3f} | {copy} ({m['edits']}) | "
                f"{named} | {probe or '-'} | {m['spec/acceptance']:.3f} | {ends} |"
            )
    return "\n".join([head, *rows])


def run_rl(config, run_dir: str, args, sets: dict, probe: dict, log) -> tuple[list, list]:
    """RL (in chunks of --eval_every steps, the held-out sets played after each) -> (the loop's
    history over all chunks, [(step, {set: metrics})])."""
    done = os.path.join(run_dir, "bench_result.json")  # a re-run reuses a finished RL stage
    os.makedirs(run_dir, exist_ok=True)  # --rl_steps 0: no loop makes it
    if os.path.exists(done):
        saved = json.load(open(done))
        return saved["history"], [tuple(p) for p in saved["points"]]
    chunk = args.eval_every or args.rl_steps
    history, points, t_end = [], [], time.time() + 60 * args.rl_minutes
    params = None
    while len(history) < args.rl_steps:
        left = t_end - time.time()
        if args.rl_minutes and left <= 0:
            break
        config.train.steps = min(args.rl_steps, len(history) + chunk)
        config.train.max_seconds = left if args.rl_minutes else 0.0
        config.checkpoint.every_steps = chunk
        out = loop.train(config, run_dir)
        if not out["history"]:
            break  # nothing trained (pool spent, or every group dropped)
        history += out["history"]
        params = jax.device_get(out["state"].params)
        in_time = not args.rl_minutes or time.time() < t_end  # out of time: only the final play
        if args.eval_every and len(history) < args.rl_steps and in_time:
            points.append(
                (len(history), evaluate(config, params, sets, args.k, args.eval_seed, probe))
            )
            log(f"held-out after {len(history)} RL steps: {brief(points[-1][1], args.k)}")
            save_json(os.path.join(run_dir, "partial.json"), dict(history=history, points=points))
    if params is not None and (not points or points[-1][0] != len(history)):  # not played yet
        save_json(os.path.join(run_dir, "partial.json"), dict(history=history, points=points))
        episodes = os.path.join(run_dir, "heldout_episodes.jsonl")
        points.append(
            (len(history), evaluate(config, params, sets, args.k, args.eval_seed, probe, episodes))
        )
    save_json(done, {"history": history, "points": points})
    return history, points


def save_json(path: str, obj) -> None:
    """obj -> path, written whole or not at all (a run killed mid-write leaves the last one):
    RL's partial.json keeps the curve so far, so a run stopped later still has it."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, default=float)
    os.replace(path + ".tmp", path)


def brief(sets: dict, k: int) -> str:
    return "; ".join(
        f"{n}: pass@1 {m['pass_rate']:.3f} best-of-{k} {m[f'best_of_{k}']:.3f} "
        f"malformed {m['malformed_rate']:.3f}"
        for n, m in sets.items()
    )


def plot(curves: dict, path: str, k: int) -> None:
    """{label: (history, points)} -> held-out pass@1 / best-of-K vs RL step (one panel per set)
    and the samplers' spec/acceptance vs RL step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3))
    for i, (label, (history, points)) in enumerate(curves.items()):
        for ax, name in zip(axes[:2], ("sites", "repos")):
            steps = [s for s, _ in points]
            ax.plot(steps, [p[name]["pass_rate"] for _, p in points], "o-", color=f"C{i}",
                    label=f"{label} pass@1")  # fmt: skip
            ax.plot(steps, [p[name][f"best_of_{k}"] for _, p in points], "s--", color=f"C{i}",
                    label=f"{label} best-of-{k}")  # fmt: skip
            ax.set_title(f"held-out {name}")
            ax.set_xlabel("RL step")
        acc = [(x["step"], x["spec/acceptance"]) for x in history if "spec/acceptance" in x]
        axes[2].plot([a for a, _ in acc], [b for _, b in acc], color=f"C{i}", label=label)
        axes[2].set_title("samplers' MTP acceptance")
        axes[2].set_xlabel("RL step")
    for ax in axes:
        ax.legend(fontsize=6)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=100)


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny4", choices=("tiny4", "tiny"))
    ap.add_argument("--mtp_modules", type=int, default=1)
    ap.add_argument(
        "--init",
        default="",
        help="exported params SFT starts from (e.g. bench_rl_coding's SFT export: a policy that "
        "already speaks the tool protocol), its context YaRN-extended to --max_tokens; '': a "
        "random init of --preset",
    )
    ap.add_argument("--max_tokens", type=int, default=4096, help="context: SFT rows, RL, eval")
    ap.add_argument("--obs_token_budget", type=int, default=2048, help="tool-output trim")
    ap.add_argument("--traces", default=TRACES, help="expert traces for SFT (repo_traces' file)")
    ap.add_argument("--new_traces", type=int, default=16, help="expert traces played now")
    ap.add_argument("--trace_minutes", type=float, default=5.0)
    ap.add_argument("--sft_steps", type=int, default=80)
    ap.add_argument("--sft_minutes", type=float, default=0.0, help="SFT wall budget (0: steps)")
    ap.add_argument("--sft_lr", type=float, default=2e-3)
    ap.add_argument("--sft_batch", type=int, default=2)
    ap.add_argument("--sft_seq_len", type=int, default=0, help="SFT row length (0: --max_tokens)")
    ap.add_argument(
        "--sft_seed",
        type=int,
        default=0,
        help="SFT's seed: the renamed copies' names, the documents' order, train.seed (a random "
        "init's params and the batches)",
    )
    ap.add_argument("--sft_turns", type=int, default=0, help="SFT on traces cut after N turns")
    ap.add_argument("--sft_renamed", type=int, default=0, help="N renamed copies a trace")
    ap.add_argument(
        "--sft_rename_words",
        action="store_true",
        help="renamed copies take names of the training repositories' identifier words "
        "(cache_header_parse) instead of syllables (hu_za_bi)",
    )
    ap.add_argument(
        "--sft_rename_match",
        action="store_true",
        help="renamed names in the shape of the names they replace: as many words (1-3), so a "
        "one-word symbol gets a one-word name, and lowerCamel kept (data/rename.py fresh_name's "
        "match)",
    )
    ap.add_argument(
        "--sft_keep_played",
        action="store_true",
        help="with --sft_renamed: each trace also as played, beside its renamed copies (renaming "
        "alone takes the real symbols' tokens out of SFT)",
    )
    ap.add_argument("--probe_traces", type=int, default=64, help="name-copy probe's traces")
    ap.add_argument(
        "--sft_drills",
        type=float,
        default=0.0,
        help="share of SFT rows from bench_copy.py's induction drills (content-addressed copy "
        "in chat form; 0: none)",
    )
    ap.add_argument(
        "--sft_drill_task",
        default="induction",
        choices=("induction", "words", "mention"),
        help="the drills' rows: random letters (bytes), code words (any tokenizer), or code "
        "words with one name marked and asked for after them (bench/copy_words.py)",
    )
    ap.add_argument(
        "--code_bpe",
        type=int,
        default=0,
        help="a BPE vocabulary of N ids learned from the training repositories for every stage "
        "(rl/envs/repos/vocabulary.py; 0: the byte tokenizer)",
    )
    ap.add_argument(
        "--code_bpe_pattern",
        default="cl100k",
        choices=tuple(PATTERNS),
        help="--code_bpe's pre-tokenizer (data/code_bpe.py): identifiers makes a name the same "
        "ids where the statement backticks it and where a call writes it",
    )
    ap.add_argument("--rl_steps", type=int, default=40)
    ap.add_argument("--rl_minutes", type=float, default=10.0, help="RL wall budget (0: steps)")
    ap.add_argument("--rl_lr", type=float, default=1e-5)
    ap.add_argument("--eval_every", type=int, default=0, help="RL steps per chunk (0: at end)")
    ap.add_argument("--group_size", type=int, default=4)
    ap.add_argument("--groups_per_batch", type=int, default=2)
    ap.add_argument("--pool", type=int, default=0, help="RL pool: its first N tasks (0: all)")
    ap.add_argument("--microbatches", type=int, default=1)
    ap.add_argument(
        "--dynamic_sampling",
        type=int,
        default=1,
        help="1: drop groups whose episodes all tie (no advantage); 0: train on them too (the "
        "KL and MTP terms still act), so a policy that never passes still takes RL steps",
    )
    ap.add_argument("--temperature", type=float, default=0.5)
    ap.add_argument("--spec_k", type=int, default=1, help="MTP drafts per verify step")
    ap.add_argument("--max_turns", type=int, default=10)
    ap.add_argument("--max_turn_tokens", type=int, default=256)
    ap.add_argument("--malformed_streak", type=int, default=2)
    ap.add_argument("--heldout_sites", type=int, default=4)
    ap.add_argument("--heldout_repos", type=int, default=4)
    ap.add_argument("--k", type=int, default=4, help="episodes per held-out task (best-of-K)")
    ap.add_argument("--eval_seed", type=int, default=2_000_000)
    ap.add_argument("--workdir", default="runs/bench_rl_repos")
    ap.add_argument("--out", default="bench/rl_repos_curve.png")
    ap.add_argument("--seeds", default="", help="e.g. 0,1: an RL run each (rl.seed)")
    tmp = os.path.join(tempfile.gettempdir(), "bench_rl_repos_tiny")
    tiny = dict(preset="tiny", max_tokens=2048, new_traces=1, sft_steps=1, rl_steps=1)
    tiny.update(rl_minutes=0.0, group_size=2, groups_per_batch=1, heldout_sites=1)
    tiny.update(heldout_repos=1, k=2, max_turns=2, max_turn_tokens=32, workdir=tmp)
    # dynamic_sampling 0: with 1 RL step a tied group would be skipped
    tiny.update(out=tmp + ".png", dynamic_sampling=0, probe_traces=8)
    return parse_tiny(ap, tiny)


def main():
    args = arguments()
    if args.tiny:  # a fresh run: re-running reuses the stages found in --workdir
        shutil.rmtree(args.workdir, ignore_errors=True)
    if not os.path.exists(os.path.join(args.workdir, "traces.jsonl")) and not os.path.isfile(
        args.traces
    ):
        sys.exit(f"error: --traces {args.traces}: no such file")
    os.makedirs(args.workdir, exist_ok=True)
    wall, t0 = {}, time.time()
    pool, chosen = select(args.heldout_sites, args.heldout_repos)
    tasks_path = os.path.join(args.workdir, "tasks", "pool.jsonl")
    if not os.path.exists(tasks_path):
        from rl.envs import save_tasks

        save_tasks(build(pool), tasks_path)
    with open(tasks_path) as f:  # a reused task file sizes the pool, not today's runnable lines
        n_pool = sum(1 for line in f if line.strip())
    sets = {name: build(lines) for name, lines in chosen.items()}
    from data.tokenizers import load_tokenizer

    spec = tokenizer_spec(args)
    tok = load_tokenizer(spec)
    traces = os.path.join(args.workdir, "traces.jsonl")
    counts = make_traces(
        pool, traces, args.traces, args.new_traces, args.trace_minutes, args.max_tokens, args, tok
    )
    held_ids = {t.id for s in sets.values() for t in s}
    assert not held_ids & {json.loads(x)["task"] for x in open(traces)}, "held-out task in traces"
    wall["tasks+traces"] = time.time() - t0
    print(f"RL pool: {n_pool} tasks ({tasks_path}; {len(pool)} runnable here now); held-out: "
          + ", ".join(f"{n} {len(s)}" for n, s in sets.items())
          + f"; traces {counts}", flush=True)  # fmt: skip
    t0 = time.time()
    params_dir = rl_stages.sft(
        traces,
        args.workdir + "/sft",
        preset=args.preset,
        mtp_modules=args.mtp_modules,
        max_tokens=args.max_tokens,
        steps=args.sft_steps,
        lr=args.sft_lr,
        init=args.init,
        batch_size=args.sft_batch,
        max_seconds=60 * args.sft_minutes,
        seq_len=args.sft_seq_len,
        mix=rl_stages.drill_mix(args.workdir, args.sft_drills, args.sft_drill_task),
        tokenizer=spec,
        tool_output_budget=args.obs_token_budget,  # one trim in SFT, RL and eval
        seed=args.sft_seed,
    )
    wall["sft"] = time.time() - t0
    seeds = parse_seeds(args.seeds) if args.seeds else [None]
    size = min(args.pool or n_pool, n_pool)  # dynamic sampling may skip many tied groups
    configs = {
        s: loop.resolve(rl_config_for(args, params_dir, tasks_path, size, s, spec)) for s in seeds
    }
    config = configs[seeds[0]]
    from model import init_params
    from model.export import load_params
    from train.trainer import init_rngs

    sft_init_key = init_rngs(args.sft_seed)[0]  # the trainer's params key of train.seed

    t0 = time.time()
    cfg, w = loop.model_config(config), args.workdir
    probe = rl_stages.name_probe_rows(TRACES, args.probe_traces, rl_stages.probe_len(cfg), tok)
    stages = {
        "before SFT": evaluate_once(
            f"{w}/eval_before_sft.json",
            config,
            # SFT's start: --init's params (at the extended context) or its random init
            lambda: load_params(args.init)[1] if args.init else init_params(cfg, sft_init_key),
            sets,
            args.k,
            args.eval_seed,
            probe,
        )
    }
    print(f"held-out before SFT: {brief(stages['before SFT'], args.k)}", flush=True)
    stages["after SFT"] = evaluate_once(
        f"{w}/eval_after_sft.json",
        config,
        lambda: load_params(params_dir)[1],
        sets,
        args.k,
        args.eval_seed,
        probe,
    )
    print(f"held-out after SFT: {brief(stages['after SFT'], args.k)}", flush=True)
    wall["eval"] = time.time() - t0
    curves, rows, afters = {}, [], {}
    for seed, config in configs.items():
        t0 = time.time()
        run_dir = os.path.join(args.workdir, "rl" if seed is None else f"rl_seed_{seed}")
        history, points = run_rl(config, run_dir, args, sets, probe, print)
        wall["rl+eval"] = time.time() - t0
        label = f"seed {config.rl.seed}"
        curves[label] = (history, [(0, stages["after SFT"])] + points)
        after = points[-1][1] if points else stages["after SFT"]
        afters[config.rl.seed] = after
        stages[f"after RL ({label}, {len(history)} steps)"] = after
        acc = [x["spec/acceptance"] for x in history if "spec/acceptance" in x]
        rows.append(
            f"| {config.rl.seed} | {len(history)} | "
            + " | ".join(f"{after[n]['pass_rate']:.3f}" for n in sets)
            + f" | {acc[0] if acc else float('nan'):.3f} -> {acc[-1] if acc else float('nan'):.3f}"
            + " | " + "/".join(f"{v:.0f}" for v in wall.values())
            + f" | {os.getloadavg()[0]:.1f} |"
        )  # fmt: skip
    plot(curves, args.out, args.k)
    print("\n" + table(stages, args.k))
    print(
        "\n| rl.seed | RL steps | pass@1 sites | pass@1 repos | samplers' MTP acceptance first "
        "-> last step | wall s (tasks+traces/SFT/eval/RL+eval) | load |\n" + "|---" * 7 + "|"
    )
    print("\n".join(rows))
    for label, (_, points) in curves.items():
        print(f"curve {label}: " + "; ".join(f"step {s}: {brief(p, args.k)}" for s, p in points))
    if args.seeds:
        for n in sets:
            after = over_seeds({s: m[n]["pass_rate"] for s, m in afters.items()})
            print(seeds_line(f"held-out {n} pass@1 after RL", after))
            gain = {
                s: m[n]["pass_rate"] - stages["after SFT"][n]["pass_rate"]
                for s, m in afters.items()
            }
            print(seeds_line(f"held-out {n} pass@1 gain over SFT", over_seeds(gain)))
    print(f"curve: {args.out}")


if __name__ == "__main__":
    main()
