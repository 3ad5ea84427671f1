"""Asynchronous on-policy RL: samplers and a trainer that share only two stores.

    trainer:  rollout store --groups--> collate --> train_step(RL loss) --> weight store (+ Orbax)
    sampler:  weight store --newest params, swapped in flight--> engine --> rollout store

    python main.py --mode=rl --config=configs/rl.py --workdir=DIR        (see configs/rl.py)

`rl.task`: 'pattern' (toy single-turn prompts, rl/samplers.py) or 'coding' (multi-turn CodingEnv
episodes in the sandbox, rl/coding_sampler.py; `resolve` checks isolation before any model loads).

`rl.mode='threads'` runs N sampler threads beside the trainer in one process (tests, notebooks);
'processes' starts N sampler processes (`python -m rl.loop --sampler ...`) that read the config
the trainer wrote to <workdir>/rl_config.json and exit when the trainer process dies.

Exactly-once: the pool order (single epoch; task j of the order is group id f'{j:06d}') and the
ids of the groups already trained, dropped or counted are saved in the Orbax checkpoint together
with the TrainState. After a SIGKILL the trainer restores both: steps after the checkpoint are
lost with their params, so their groups are trained again, once; every other group is skipped.
Samplers skip groups whose file exists. <workdir>/journal.jsonl logs (step, group ids) per step.

Staleness: a group whose oldest policy token is more than `max_staleness` versions behind the
trainer's version is dropped and counted; samplers stop producing while `max_ahead` groups wait.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from rl import batch as rb
from rl.curriculum import Curriculum
from rl.samplers import PromptTask, SingleTurnSampler, pattern_reward
from rl.store import RolloutStore
from rl.weight_sync import Follower, WeightReader, WeightWriter

# --- model and tasks ----------------------------------------------------------------------------


def model_config(config):
    """The model config: from exported params, an HF folder or a preset name."""
    import dataclasses  # pylint: disable=import-outside-toplevel

    from model import export, hf, presets  # pylint: disable=import-outside-toplevel

    if config.init_params_from:
        with open(os.path.join(config.init_params_from, "model_config.json")) as f:
            cfg = export.config_from_json(f.read())
    elif os.path.isdir(config.model):
        cfg = hf.read_config(config.model)[0]
    else:
        cfg = presets.get(config.model)
        # a random-init preset's positions must cover a coding episode (rows of rl.max_tokens)
        cfg = dataclasses.replace(
            cfg, max_position_embeddings=max(cfg.max_position_embeddings, config.rl.max_tokens)
        )
    return dataclasses.replace(cfg, dtype="float32")


def initial_params(config, cfg):
    import model  # pylint: disable=import-outside-toplevel
    from model import export  # pylint: disable=import-outside-toplevel

    if config.init_params_from:
        return export.load_params(config.init_params_from)[1]
    if os.path.isdir(config.model):
        return model.load_hf_checkpoint(config.model)[1]
    return model.init_params(cfg, jax.random.PRNGKey(config.rl.seed))


def make_task(rl, j: int):
    """Task j of the pool: a toy 'pattern' prompt, or a generated coding task."""
    if rl.task == "coding":
        templates = tuple(rl.coding.get("templates", ()) or ())
        return coding_pool(rl.seed, rl.pool_size, tuple(rl.coding.difficulties), templates)[j]
    if rl.task != "pattern":
        raise ValueError(f"rl.task={rl.task!r}: expected 'pattern' or 'coding'")
    rng = np.random.default_rng(rl.seed * 7919 + j)
    return PromptTask(f"{j:06d}", [int(x) for x in rng.integers(rl.pattern_size, 320, size=4)])


@functools.cache
def coding_pool(
    seed: int, n: int, difficulties: tuple[int, ...], templates: tuple[str, ...] = ()
) -> list:
    """The RL pool: n procedural tasks from `templates` (default: every training template; the
    held-out families are the agentic eval's, and naming one is an error), seeded; the eval draws
    from its own seed stream (EVAL_SEED_BASE)."""
    from rl.envs import generate_tasks  # noqa: PLC0415
    from rl.envs.taskgen import training_templates  # noqa: PLC0415

    allowed = training_templates()
    bad = [t for t in templates if t not in allowed]
    if bad:
        raise ValueError(
            f"rl.coding.templates: {', '.join(bad)} not a training template "
            f"(choose from {', '.join(allowed)})"
        )
    return generate_tasks(
        n, seed=seed, difficulties=difficulties, templates=tuple(templates) or allowed
    )


def make_sampler(rl, cfg):
    if rl.task == "coding":
        from data.tokenizers import ByteTokenizer  # noqa: PLC0415
        from rl.coding_sampler import CodingSampler  # noqa: PLC0415
        from rl.rewards import reward_config_from_dict  # noqa: PLC0415

        c = rl.coding
        return CodingSampler(
            cfg,
            ByteTokenizer(),
            reward_config_from_dict(rl.reward.to_dict()),
            group_size=rl.group_size,
            max_tokens=rl.max_tokens,
            temperature=rl.temperature,
            swap_every=rl.swap_every,
            slots=c.slots,
            max_turns=c.max_turns,
            max_turn_tokens=c.max_turn_tokens,
            obs_token_budget=c.obs_token_budget,
            max_malformed_streak=c.max_malformed_streak,
            workers=c.workers,
            min_bucket=c.min_bucket,
        )
    reward = pattern_reward(range(rl.pattern_size))
    return SingleTurnSampler(
        cfg,
        reward,
        group_size=rl.group_size,
        max_new_tokens=rl.max_new_tokens,
        temperature=rl.temperature,
        swap_every=rl.swap_every,
    )


def resolve(config):
    """Checks run before any model loads. Coding: the sandbox must isolate (fail closed:
    rl.envs.require_isolation raises unless bubblewrap works or the caller opted in), and the
    trainer's valid vocab is the tokenizer's (the engine samples from it; log-probs must match)."""
    rl = config.rl
    rows, n_micro = rl.groups_per_batch * rl.group_size, rl.get("microbatches", 1)
    if n_micro < 1 or rows % n_micro:
        raise ValueError(
            f"rl.microbatches={n_micro}: must be >= 1 and divide the batch's "
            f"groups_per_batch x group_size = {rows} rows"
        )
    if rl.task != "coding":
        return config
    from data.tokenizers import ByteTokenizer  # noqa: PLC0415
    from rl.envs import require_isolation  # noqa: PLC0415

    require_isolation()
    config = config.copy_and_resolve_references()
    vocab = ByteTokenizer().vocab_size
    if config.rl.valid_vocab not in (0, vocab):
        raise ValueError(f"rl.valid_vocab={config.rl.valid_vocab}: coding samples from {vocab}")
    config.rl.valid_vocab = vocab
    return config


def pool_order(rl) -> list[int]:
    """Single epoch: each task of the pool once, in a seeded order (saved in the checkpoint)."""
    return [int(x) for x in np.random.default_rng(rl.seed).permutation(rl.pool_size)]


# --- sampler --------------------------------------------------------------------------------------


def _to_engine(params):
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)


def sampler_loop(
    config,
    workdir: str,
    sampler_id: int,
    stop: threading.Event | None = None,
    parent_pid: int | None = None,
) -> int:
    """Produces this sampler's share (positions j % N == id) of the pool; -> groups written."""
    rl = config.rl
    cfg = model_config(config)
    store = RolloutStore(os.path.join(workdir, "rollouts"))
    with open(os.path.join(workdir, "pool.json")) as f:
        order = json.load(f)["order"]
    follower = Follower(WeightReader(os.path.join(workdir, "weights")), cast=_to_engine)
    sampler = make_sampler(rl, cfg)
    have = set(store.list())
    todo = [
        j for j in range(len(order)) if j % rl.samplers == sampler_id and f"{j:06d}" not in have
    ]
    written = 0

    def alive():
        if stop is not None and stop.is_set():
            return False
        return parent_pid is None or os.getppid() == parent_pid

    cur = curriculum_of(rl)
    for c in range(0, len(todo), rl.groups_per_call):
        chunk = todo[c : c + rl.groups_per_call]
        while alive():  # backpressure: bounded work ahead of the trainer keeps staleness low
            p = store.progress()
            if len(store.list()) - p.get("consumed", 0) < rl.max_ahead:
                break
            time.sleep(0.05)
        if not alive():
            break
        tasks = {j: make_task(rl, order[j]) for j in chunk}
        for j in [j for j in chunk if cur.skip(tasks[j], order[j])]:
            store.put(f"{j:06d}", [])  # skipped: counted by the trainer, never trained
            written += 1
            del tasks[j]
        if not tasks:
            continue
        t0 = time.perf_counter()
        groups = sampler.play(list(tasks.values()), follower, seed=rl.seed * 1_000_003 + chunk[0])
        secs = time.perf_counter() - t0
        for (j, task), g in zip(tasks.items(), groups):
            for r in g:
                r["group_id"], r["task"] = f"{j:06d}", order[j]
                r["sample_seconds"] = secs / len(groups)
            store.put(f"{j:06d}", g)
            cur.record(task, g)
            written += 1
    return written


def curriculum_of(rl) -> Curriculum:
    c = rl.get("curriculum") or {}
    return Curriculum(c.get("key", ""), c.get("after", 0), c.get("prob", 0.0), rl.seed)


def sampler_cli(argv) -> None:
    """python -m rl.loop --sampler WORKDIR ID PARENT_PID"""
    workdir, sid, ppid = argv[0], int(argv[1]), int(argv[2])
    with open(os.path.join(workdir, "rl_config.json")) as f:
        config = ml_collections.ConfigDict(json.load(f))
    if config.rl.compile_cache:
        _compile_cache(config.rl.compile_cache)
    sampler_loop(config, workdir, sid, parent_pid=ppid)


def _compile_cache(path: str) -> None:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# --- trainer --------------------------------------------------------------------------------------


class _Books:
    """What the checkpoint holds besides the TrainState: pool order and group bookkeeping. Groups
    read but not yet trained (`pending`) are not checkpointed: after a restart they are read
    again from the rollout store."""

    def __init__(self, order, consumed=(), dropped=(), zero_signal=0, skipped=0):
        self.order, self.consumed, self.dropped = list(order), list(consumed), list(dropped)
        self.zero_signal, self.skipped = zero_signal, skipped  # skipped: rl.curriculum's
        self.seen = set(self.consumed) | set(self.dropped)
        self.pending: list[tuple[str, list[dict]]] = []  # (group id, records), arrival order
        self.zero_since_batch = 0

    def to_json(self) -> dict:
        return {
            "order": self.order,
            "consumed": self.consumed,
            "dropped": self.dropped,
            "zero_signal": self.zero_signal,
            "skipped": self.skipped,
        }

    def unfinished(self) -> bool:
        return len(self.seen) < len(self.order) or bool(self.pending)


def _no_signal(group: list[dict]) -> bool:
    return len({round(float(r["reward"]), 9) for r in group}) == 1  # zero advantage everywhere


def _select(store, books: _Books, rl, version: int):
    """-> (records to train, their group ids, stats) once a batch is ready, else None.

    New groups are read in arrival order. An empty group (a task rl.curriculum skipped, or one
    whose every episode the driver dropped) is counted in `skipped` and settled, never trained. A group whose rewards are all equal carries no signal:
    counted, and with rl.dynamic_sampling never trained: the batch waits for further groups until
    it holds rl.groups_per_batch groups with signal (DAPO's dynamic sampling; only the pool's last
    batch may be smaller). A group whose oldest policy token is more than rl.max_staleness versions
    behind `version` when its batch forms is dropped (counted)."""
    for g in store.list():
        if g in books.seen:
            continue
        books.seen.add(g)
        group = store.get(g)
        if not group:  # rl/curriculum.py skipped it (or every episode of it was dropped)
            books.skipped += 1
            books.consumed.append(g)
            continue
        if _no_signal(group):
            books.zero_signal += 1
            books.zero_since_batch += 1
            if rl.dynamic_sampling:
                books.consumed.append(g)  # read and settled: never trained, never read again
                continue
        books.pending.append((g, group))
    fresh = []
    for g, group in books.pending:
        if version - rb.oldest_version(group) > rl.max_staleness:
            books.dropped.append(g)
        else:
            fresh.append((g, group))
    books.pending = fresh
    need = rl.groups_per_batch
    last = len(books.seen) == len(books.order)  # no more groups will come
    if not books.pending or (len(books.pending) < need and not last):
        return None
    take, books.pending = books.pending[:need], books.pending[need:]
    recs, ids, stal = [], [], []
    for g, group in take:
        books.consumed.append(g)
        recs += group
        ids.append(g)
        stal.append(max(version - rb.oldest_version(group), 0))
    stats = {"staleness": stal, "zero_signal": books.zero_since_batch}
    books.zero_since_batch = 0
    return recs, ids, stats


def _metrics(recs, stats, step_metrics, sync, dt):
    rewards = np.array([r["reward"] for r in recs]) if recs else np.zeros(1)
    m = {k: float(v) for k, v in step_metrics.items()}
    m["reward/mean"] = float(rewards.mean())
    terms = {}
    for r in recs:
        for k, v in (r.get("reward_terms") or {}).items():
            terms.setdefault(k, []).append(v)
    for k, v in terms.items():
        m[f"reward/{k}"] = float(np.mean(v))
    m["pass_rate"] = float(np.mean([t == 1.0 for t in terms.get("outcome", [0.0])]))
    counts = [r.get("counts", {}).get("malformed_calls", 0) for r in recs]
    m["malformed_rate"] = float(np.mean([c > 0 for c in counts])) if counts else 0.0
    m["episode_len"] = float(np.mean([len(r["tokens"]) for r in recs])) if recs else 0.0
    st = np.asarray(stats["staleness"] or [0])
    m.update({"staleness/max": float(st.max()), "staleness/mean": float(st.mean())})
    for b in range(4):
        m[f"staleness/hist_{b}"] = float(np.sum(st == b) if b < 3 else np.sum(st >= 3))
    m["zero_signal_groups"] = float(stats["zero_signal"])
    pol = sum(int(np.sum(r["mask"])) for r in recs)
    m["trained_tokens_per_s"] = pol / max(dt, 1e-9)
    # Each record carries its group's share of the play call's wall time: count it once per group.
    shares = {r.get("group_id"): r.get("sample_seconds", 0.0) for r in recs}
    m["sampled_tokens_per_s"] = pol / max(sum(shares.values()), 1e-9)
    m["sync/bytes"], m["sync/seconds"] = float(sync["bytes"]), float(sync["seconds"])
    m["sync/fraction_of_full"] = sync["bytes"] / sync["full_bytes"]
    return m


def _start_samplers(config, workdir, stop):
    rl = config.rl
    if rl.mode == "threads":
        threads = [
            threading.Thread(target=sampler_loop, args=(config, workdir, i, stop), daemon=True)
            for i in range(rl.samplers)
        ]
    elif rl.mode == "processes":
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
        threads = [
            subprocess.Popen(
                [sys.executable, "-m", "rl.loop", "--sampler", workdir, str(i), str(os.getpid())],
                env=env,
            )
            for i in range(rl.samplers)
        ]
        return threads
    else:
        raise ValueError(f"rl.mode={rl.mode!r}: expected 'threads' or 'processes'")
    for t in threads:
        t.start()
    return threads


def _truncate_journal(path: str, step: int) -> None:
    """Keeps the journal entries the restored state contains (steps <= step): the journal is then
    the history of the params the run holds, each group at most once."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        keep = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
    with open(path + ".tmp", "w") as f:
        f.writelines(keep)
    os.replace(path + ".tmp", path)


def train(config, workdir: str, *, log=print) -> dict:
    """Runs the RL loop until the pool is used up, rl.steps or rl.max_seconds (no step starts
    after it; the one running finishes); resumes from <workdir>."""
    from rl.trainer import init_state, jit_ref_logprobs, jit_rl_step  # noqa: PLC0415
    from train.checkpoint import Checkpointer  # noqa: PLC0415
    from train.tensorboard import SummaryWriter  # noqa: PLC0415

    config = resolve(config)  # before any model loads
    rl = config.rl
    os.makedirs(workdir, exist_ok=True)
    if rl.compile_cache:
        _compile_cache(rl.compile_cache)
    cfg = model_config(config)
    params0 = initial_params(config, cfg)
    state = init_state(params0, rl.lr, rl.seed)
    ref_params = params0 if rl.kl_beta else None  # beta = 0 holds no reference
    ckpt = Checkpointer(workdir, keep=2, async_save=False)
    restored = ckpt.restore_latest(state, jax.tree.map(lambda x: x.sharding, state))
    books = _Books(pool_order(rl))
    if restored is not None:
        state, data, _ = restored
        books = _Books(
            data["order"],
            data["consumed"],
            data["dropped"],
            data["zero_signal"],
            data.get("skipped", 0),  # absent in checkpoints from before rl.curriculum
        )
        log(f"rl: resumed at step {int(state.step)} ({len(books.consumed)} groups trained)")
    _truncate_journal(os.path.join(workdir, "journal.jsonl"), int(state.step))
    with open(os.path.join(workdir, "rl_config.json"), "w") as f:
        f.write(config.to_json())
    with open(os.path.join(workdir, "pool.json"), "w") as f:
        json.dump({"order": books.order}, f)
    store = RolloutStore(os.path.join(workdir, "rollouts"))
    writer = WeightWriter(
        os.path.join(workdir, "weights"), dtype=rl.weight_dtype, full_every=rl.full_every
    )
    version = int(state.step)
    writer.rewind(version)
    writer.publish(jax.device_get(state.params), version)
    store.write_progress({"consumed": len(books.seen), "version": version})
    reported = len(books.seen)  # the consumed count samplers last saw (their backpressure)
    step_fn = jit_rl_step(cfg, rl)
    ref_fn = jit_ref_logprobs(cfg, rl.temperature, rl.valid_vocab) if rl.kl_beta else None
    tb = SummaryWriter(os.path.join(workdir, "tb"))
    stop = threading.Event()
    samplers = _start_samplers(config, workdir, stop)
    rows = rl.groups_per_batch * rl.group_size
    history = []
    deadline = time.monotonic() + rl.max_seconds if rl.get("max_seconds", 0) else float("inf")
    try:
        while (
            books.unfinished()
            and (not rl.steps or version < rl.steps)
            and time.monotonic() < deadline
        ):
            sel = _select(store, books, rl, version)
            if sel is None:
                if reported != len(books.seen):  # groups read, no batch yet (dynamic
                    # sampling): samplers' backpressure counts them as consumed
                    store.write_progress({"consumed": len(books.seen), "version": version})
                    reported = len(books.seen)
                time.sleep(0.02)
                continue
            recs, ids, stats = sel
            t0 = time.perf_counter()
            b = rb.collate(
                recs,
                seq_len=rl.max_tokens,
                rows=rows,
                n_moe_layers=cfg.num_moe_layers,
                k=cfg.num_experts_per_tok,
                malformed_adv=rl.malformed_adv,
                negative_scale=rl.negative_adv_scale,
            )
            b = {k: jnp.asarray(v) for k, v in b.items()}
            if ref_fn is not None:
                b["ref_logprobs"] = ref_fn(ref_params, b)
            state, sm = step_fn(state, b)
            version = int(state.step)
            sync = writer.publish(jax.device_get(state.params), version)
            m = _metrics(recs, stats, jax.device_get(sm), sync, time.perf_counter() - t0)
            m["dropped_groups_total"] = float(len(books.dropped))
            m["zero_signal_groups_total"] = float(books.zero_signal)
            m["curriculum_skipped_total"] = float(books.skipped)
            tb.scalars(version, m)
            history.append({"step": version, **m})
            with open(os.path.join(workdir, "journal.jsonl"), "a") as f:
                entry = {"step": version, "groups": ids, "staleness": stats["staleness"]}
                f.write(json.dumps(entry) + "\n")
            if version % rl.checkpoint_every == 0:
                ckpt.save(state, books.to_json(), config.to_dict())
            store.write_progress({"consumed": len(books.seen), "version": version})
            reported = len(books.seen)
            if version % rl.log_every == 0:
                log(
                    f"rl step {version}: reward {m['reward/mean']:.3f} "
                    f"staleness<= {m['staleness/max']:.0f} sync {m['sync/fraction_of_full']:.3f}"
                )
        if version not in ckpt.all_steps():
            ckpt.save(state, books.to_json(), config.to_dict(), force=True)
        ckpt.wait()
    finally:
        stop.set()
        for s in samplers:
            if isinstance(s, subprocess.Popen):
                s.terminate()
                s.wait()
            else:
                s.join(timeout=60)
        tb.close()
        ckpt.close()
    return {"state": state, "history": history, "books": books}


def main(config, workdir: str) -> None:
    """--mode=rl entry."""
    out = train(config, workdir)
    h = out["history"]
    if h:
        print(
            f"rl: {len(h)} steps, reward {h[0]['reward/mean']:.3f} -> {h[-1]['reward/mean']:.3f}, "
            f"{len(out['books'].dropped)} groups dropped (stale), "
            f"{out['books'].zero_signal} zero-signal groups, "
            f"{out['books'].skipped} skipped by rl.curriculum"
        )


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--sampler":
        sampler_cli(sys.argv[2:])
    else:
        sys.exit("usage: python -m rl.loop --sampler WORKDIR ID PARENT_PID")
