"""The stages the learning benches chain (bench_rl_coding.py, bench_rl_repos.py): train/'s loop
run to an export (pretraining, SFT), the held-out play of a params pytree in the RL loop's own
CodingSampler, and its metrics by rl.episodes.episode_metrics (the one definition). Imported by
the bench scripts (run from the repo root: `python bench/x.py` puts the root on sys.path); no
model work happens at import. The real-repository task sets (bench_rl_repos.py) are chosen here
too, as pool lines, so choosing them needs neither JAX nor a built task.
"""

from __future__ import annotations

import json
import os

KINDS = ("bugfix", "feature")  # what the repo expert works; review/DevOps are another harness


def train_and_export(c, workdir: str) -> str:
    """Runs train/'s loop for c.train.steps or c.train.max_seconds (unless its export exists:
    re-runs reuse finished stages; a time-bounded run reuses its latest export, whatever its
    step) and -> the exported params dir."""
    from train import convert
    from train import trainer as train_loop

    c.checkpoint.every_steps = c.train.steps
    export = os.path.join(workdir, "export", f"params_{c.train.steps}")
    if c.train.max_seconds and os.path.isdir(os.path.dirname(export)):
        done = [d for d in os.listdir(os.path.dirname(export)) if d.startswith("params_")]
        done = [d for d in done if d[7:].isdigit()]
        if done:
            export = os.path.join(os.path.dirname(export), max(done, key=lambda d: int(d[7:])))
    if not os.path.exists(os.path.join(export, "model_config.json")):
        train_loop.train(c, workdir)
        export = convert.export_latest(c, workdir)
    return export


def coding_rl_config(args, params_dir: str, seed: int | None, pool_size: int, rl=None, coding=None):
    """configs/rl.py's coding task as the learning benches run it, from their shared flags
    (group_size, groups_per_batch, max_tokens, temperature, rl_lr, microbatches,
    malformed_streak); rl / coding: each bench's own rl.* and rl.coding.* keys on top.
    seed: rl.seed (None: configs/rl.py's)."""
    from configs import rl as rl_config

    c = rl_config.get_config()
    c.init_params_from = params_dir
    if seed is not None:
        c.rl.seed = seed
    c.rl.update(
        task="coding",
        pool_size=pool_size,
        group_size=args.group_size,
        groups_per_batch=args.groups_per_batch,
        groups_per_call=args.groups_per_batch,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        max_staleness=2,
        max_ahead=args.groups_per_batch * 2,
        **(rl or {}),
    )
    c.train.update(lr=args.rl_lr, log_every=1, microbatches=args.microbatches)
    c.rl.coding.update(
        max_malformed_streak=args.malformed_streak,
        slots=8,
        workers=2,
        min_bucket=64,
        **(coding or {}),
    )
    return c


def sft(traces: str, workdir: str, **options) -> str:
    """-> the exported params dir of an SFT run: train/'s loop on sft_config(traces, **options)."""
    return train_and_export(sft_config(traces, **options), workdir)


def sft_config(
    traces: str,
    *,
    preset: str,
    mtp_modules: int,
    max_tokens: int,
    steps: int,
    lr: float,
    init: str = "",
    batch_size: int = 4,
    max_seconds: float = 0.0,
    seq_len: int = 0,
    mix: tuple = (),
    tokenizer: str = "byte",
    tool_output_budget: int = 0,
    seed: int = 0,
):
    """-> the config of an SFT run (configs/sft.py's loss: assistant tokens only) on the trace
    file `traces` (and `mix`), from `init` (exported params: a context
    shorter than max_tokens is extended by context_extension) or a random init of `preset`; with
    MTP modules they train jointly by self-distillation. max_seconds > 0: no step starts after
    that many seconds (a shared machine's bound; the export is of the step reached). seq_len:
    the rows' length when shorter than the context (0: max_tokens), e.g. for trace prefixes.
    mix: ((name, chat jsonl, share of rows), ...) trained beside the traces, which keep the rest.
    tokenizer: data.tokenizer's spec; a random init's vocabulary is sized to it (an init's must
    hold it: train/'s data check). tool_output_budget: the rows' tool results trimmed to that
    many tokens (data/chat.py's trim, as RL's obs_token_budget; 0: configs/sft.py's). seed:
    train.seed (a random init's params, the batches' order)."""
    from configs import sft as sft_config
    from data.tokenizers import load_tokenizer

    c = sft_config.get_config()
    c.model = preset
    c.init_params_from = init
    c.model_overrides = dict(num_mtp_modules=mtp_modules, max_position_embeddings=max_tokens)
    if init:
        c.model_overrides.update(context_extension(init, max_tokens))
    elif tokenizer != "byte":
        c.model_overrides["vocab_size"] = load_tokenizer(tokenizer).vocab_size
    c.data.tokenizer = tokenizer
    if tool_output_budget:
        c.data.tool_output_budget = tool_output_budget
    rest = 1.0 - sum(share for _, _, share in mix)
    if not 0 < rest <= 1:
        raise ValueError(f"sft mix {mix}: the shares must leave the traces a share in (0, 1]")
    traces_source = dict(c.data.sources[0], paths=[traces], weight=rest)
    c.data.sources = (traces_source,) + tuple(
        dict(c.data.sources[0], paths=[path], name=name, weight=share) for name, path, share in mix
    )
    c.data.heldout_fraction = 0.05
    c.train.update(
        steps=steps,
        batch_size=batch_size,
        seq_len=seq_len or max_tokens,
        lr=lr,
        warmup_steps=10,
        eval_every=min(steps, 25)
        if max_seconds
        else steps,  # a time-bounded run: losses on the way
        eval_batches=2,
        log_every=20,
        mtp_mode="distill" if mtp_modules else "none",
        max_seconds=max_seconds,
        seed=seed,
    )
    return c


def context_extension(init: str, max_tokens: int) -> dict:
    """ModelConfig overrides that extend the exported model in `init` to `max_tokens` positions
    the way the long-context stage does (configs/long_context.py): YaRN with factor max_tokens /
    the context its RoPE was trained at (its max_position_embeddings, or the original context of
    a model already extended). {} when it already holds max_tokens."""
    from model import export

    cfg = export.load_config(init)
    if max_tokens <= cfg.max_position_embeddings:
        return {}
    rope = cfg.rope_scaling
    trained = (
        rope.original_max_position_embeddings if rope.factor > 1 else cfg.max_position_embeddings
    )
    return dict(
        rope_scaling=dict(factor=max_tokens / trained, original_max_position_embeddings=trained)
    )


def play_heldout(config, params, tasks, k: int, seed: int) -> tuple[list[list[dict]], dict]:
    """k episodes of each task at the RL temperature in the RL loop's sampler (config: a resolved
    RL config), params fixed -> (the sampler's groups, one per task; its counters with
    rl.sampling.samplers.acceptance's spec/ keys when it decoded speculatively)."""
    from rl.learning import loop
    from rl.sampling import sampler_process
    from rl.sampling.samplers import acceptance
    from rl.stores.weight_store import FixedWeights

    rl = config.rl.copy_and_resolve_references()
    rl.group_size = k
    sampler = sampler_process.make_sampler(rl, loop.model_config(config))
    groups = sampler.play(tasks, FixedWeights(sampler_process.to_engine(params)), seed=seed)
    return groups, dict(sampler.counters, **acceptance(sampler.counters))


def transcript(tok, record: dict) -> dict:
    """An episode record as text to read: its ending, grade, malformed turns and its turns after
    the prompt, each ["policy" | "env", text] (the mask's runs: 1 on the policy's tokens)."""
    from eval.copy_rate import mask_runs

    start = record["prompt_len"]
    ids, mask = list(record["tokens"])[start:], list(record["mask"])[start:]
    turns = [["policy" if m else "env", tok.decode(ids[lo:hi])] for m, lo, hi in mask_runs(mask)]
    keys = ("task_id", "done_reason", "tests_passed", "tests_total", "malformed_turns")
    return dict({key: record.get(key) for key in keys}, turns=turns)


def heldout_metrics(task_ids: list[str], groups: list[list[dict]], k: int) -> dict:
    """rl.episodes.episode_metrics.episode_metrics (ks 1, k and 4 when k > 4: best-of-4 from 16
    episodes a task is the unbiased estimator, less noisy than from 4) over the sampler's groups,
    one per task, each topped up to k episodes with failures for the episodes the driver
    dropped."""
    from rl.episodes.episode_metrics import episode_metrics
    from rl.episodes.schema import Episode

    records = []
    for task_id, group in zip(task_ids, groups, strict=True):
        ends = sum(r.get("segment", 0) == r.get("segments", 1) - 1 for r in group)  # episodes
        records += group + [Episode.dropped(task_id).to_dict() for _ in range(k - ends)]
    return episode_metrics(records, ks=(1, 4, k) if k > 4 else (1, k))


def describe(m: dict, k: int = 4) -> str:
    """'pass@1 x best-of-k y partial z endings {reason: episodes}' of heldout_metrics."""
    n = m["episodes"]
    endings = {key[5:]: round(v * n) for key, v in m.items() if key.startswith("done/")}
    return (
        f"pass@1 {m['pass_rate']:.3f} best-of-{k} {m[f'best_of_{k}']:.3f} "
        f"partial credit {m['partial_credit']:.3f} ({m['tasks']} tasks x {k}) endings {endings}"
    )


def interleave(items: list, n: int) -> list:
    """The first n of `items` (pool lines: dicts with "project") taken round robin over their
    projects, each project's own order kept."""
    by: dict[str, list] = {}
    for d in items:
        by.setdefault(d["project"], []).append(d)
    out, queues = [], list(by.values())
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def select(n_sites: int, n_repos: int) -> tuple[list, dict]:
    """(RL pool lines, {'sites': lines, 'repos': lines}) as data/repos/pool.jsonl lines, chosen
    without building a task (building one costs ~1-2 s); raises on an overlap between training
    and held-out (ids or repositories)."""
    from rl.envs.repos import holdout, scale
    from rl.envs.repos.projects import load_recipes

    held = set(holdout.HELD_OUT_REPOS)
    train = runnable_here([d for d in scale.load_pool(split="train") if d["family"] in KINDS])
    suite = [dict(r.to_dict(), family=r.kind, split="heldout") for r in load_recipes()]
    sites = [d for d in suite if d["project"] not in held]
    repos = [d for d in suite if d["project"] in held]
    repos += [d for d in scale.load_pool(split="heldout") if d["family"] in KINDS]
    sets = {"sites": interleave(sites, n_sites), "repos": interleave(repos, n_repos)}
    bad = [d["id"] for d in train if d["project"] in held]
    bad += [d["id"] for d in sites if d["id"] in {x["id"] for x in train}]
    if bad:
        raise ValueError(f"held-out tasks or repositories in the RL pool: {bad[:3]}")
    return train, sets


def runnable_here(lines: list, log=print) -> list:
    """The lines whose repository's declared test dependencies are in this machine's cache
    (rl/envs/isolation/dep_cache.py); the others are left out and counted, so a machine without
    a set runs the rest instead of failing at that repository's first episode."""
    from rl.envs.isolation.dep_cache import MissingTestDeps, host_dir
    from rl.envs.repos.vendored import load_spec

    missing = {}
    for project in sorted({d["project"] for d in lines}):
        try:
            host_dir(load_spec(project).test_deps)
        except MissingTestDeps:
            missing[project] = load_spec(project).test_deps
    kept = [d for d in lines if d["project"] not in missing]
    if missing:
        pins = " ".join(sorted({p for v in missing.values() for p in v}))
        log(
            f"left out {len(lines) - len(kept)} pool lines of {', '.join(missing)}: their declared "
            f"test dependencies are not cached here (python -m rl.envs.repos deps {pins})"
        )
    return kept


def build(lines: list) -> list:
    """The Tasks of pool lines (rebuilt from the vendored files, no sandbox)."""
    from rl.envs.repos import scale

    return scale.pool_tasks(lines)


def probe_len(cfg) -> int:
    """The name-copy probe's row length: 2,048 (a naming prefix is ~1.0-1.6k byte tokens), or the
    model's context when shorter."""
    return min(2048, cfg.max_position_embeddings)


def name_probe_rows(
    traces_path: str, n: int = 64, seq_len: int = 2048, tok=None, pool: tuple | None = None
) -> dict:
    """{'trained names': rows, 'fresh names': rows} for eval/name_copy.py's probe: n traces of
    `traces_path` (a fixed sample) as they are, and renamed afresh by data/rename.py (names no
    training trace holds: only copying writes them), in `tok`'s ids (None: bytes). `pool`
    (data/rename.py word_pool): also 'word names', the same sample renamed with `pool`'s words
    (names of the code's own words that no trace holds)."""
    import random

    from data.rename import renamed_trace
    from data.tokenizers import ByteTokenizer
    from eval.name_copy import naming_rows

    with open(traces_path, encoding="utf-8") as f:
        traces = [json.loads(x) for x in f if x.strip()]
    sample = random.Random(0).sample(traces, min(n, len(traces)))
    tok = tok or ByteTokenizer()
    rows = {"trained names": naming_rows(tok, sample, seq_len)}
    renames = [("fresh names", None)] + ([("word names", pool)] if pool else [])
    for name, words in renames:
        renamed = [renamed_trace(t, random.Random(i), words) for i, t in enumerate(sample)]
        rows[name] = naming_rows(tok, [t for t in renamed if t], seq_len)
    return rows


def prefix_turns(trace: dict, turns: int) -> dict:
    """`trace` cut after its `turns`-th assistant message (0: whole)."""
    if not turns:
        return trace
    messages, seen = [], 0
    for m in trace["messages"]:
        messages.append(m)
        seen += m["role"] == "assistant"
        if seen == turns:
            break
    return dict(trace, messages=messages)


def drill_mix(workdir: str, share: float, task: str) -> tuple:
    """sft_config's mix for bench_rl_repos.py --sft_drills: bench_copy.py's drills of `task`
    (20,000 documents in `workdir`: induction rows, 2.08M byte tokens, more than a 14-minute SFT
    reads; or words / mention rows of 24 filler words, bench/copy_words.py) at `share` of the
    rows."""
    if not share:
        return ()
    from bench.bench_copy import write_drills

    pool = ()
    if task in ("words", "mention"):
        from data.rename import word_pool
        from rl.envs.repos.vocabulary import training_files

        pool = word_pool(training_files())
    path = os.path.join(workdir, f"drills_{task}.jsonl")
    if not os.path.exists(path):
        write_drills(path, 20_000, half=64, seed=0, pool=pool, words=24, ask=task == "mention")
    return (("copy_drills", path, share),)


def count_tokens(tok, trace: dict) -> int:
    """The rendered chat's length in `tok`'s ids (data/chat.py: what SFT trains on)."""
    from data.chat import render_messages

    return len(render_messages(tok, trace["messages"])[0])


def sft_traces(
    traces: list,
    *,
    renamed: int,
    turns: int,
    seed: int,
    tok=None,
    pool: tuple | None = None,
    match: bool = False,
    keep: bool = False,
) -> list:
    """The SFT documents of expert traces: each cut after `turns` assistant turns (0: whole),
    then replaced by `renamed` copies named afresh (data/rename.py, syllable names or `pool`'s
    words, as many words as the old name with `match`; 0: as played; a trace whose statement
    names nothing renamable is kept as played), or with `keep` kept as played beside them, in a
    seeded shuffle; "tokens" recounted in `tok`'s ids (None: bytes). Why keep: renaming takes a
    symbol's tokens out of every document, and SFT then pushes them down everywhere (session
    46: half the probe's real symbols' first tokens appear in no renamed document)."""
    import random

    from data.rename import renamed_trace
    from data.tokenizers import ByteTokenizer

    rng, tok, out = random.Random(seed), tok or ByteTokenizer(), []
    for trace in traces:
        cut = prefix_turns(trace, turns)
        copies = [renamed_trace(cut, rng, pool, match) for _ in range(renamed)]
        copies = [c for c in copies if c]
        out += [cut] + copies if keep else copies or [cut]
    if renamed or turns:
        out = [dict(t, tokens=count_tokens(tok, t)) for t in out]
        rng.shuffle(out)
    return out
