"""Asynchronous on-policy RL: the one trainer (train/trainer.py) with the RL loss and the RL batch
source, and samplers that share only two stores with it.

    trainer:  rollout store --groups--> RLBatchSource --> train step (RL loss) on the mesh
                                                          --> weight store (+ Orbax checkpoint)
    sampler:  weight store --newest params, swapped in flight--> engine --> rollout store

    python main.py --mode=rl --config=configs/rl.py --workdir=DIR        (see configs/rl.py)

The trainer is pretraining's: its mesh (`config.mesh`, `config.rules`), optimizer roles and
schedule (`config.train`), non-finite guard, SIGTERM save, progress/MFU lines, TensorBoard,
multi-host flags and checkpoint format; RL brings only its loss (rl/learning/grpo.py) and its
batch source (rl/learning/batch_source.py). An RL checkpoint is therefore a pretraining
checkpoint: --mode=convert exports it and --mode=eval evaluates the export. Samplers:
rl/sampling/sampler_process.py.
"""

from __future__ import annotations

import jax

from rl.learning.batch_source import RLBatchSource
from rl.learning.grpo import make_rl_loss
from rl.learning.losses import model_apply, model_mtp_apply
from rl.sampling.rl_tasks import rl_task
from rl.sampling.run_config import model_config  # noqa: F401  (rl.learning.loop.model_config: callers' name)
from rl.sampling.sampler_process import Samplers, compile_cache
from train.config_check import check_rl, check_rl_mtp


def resolve(config):
    """The run config, resolved and checked before any model loads (the checks:
    train/config_check.py). The trainer's rows and row length are the RL batch's (train.batch_size
    = groups_per_batch x group_size, train.seq_len = rl.max_tokens); in threads mode with sampler
    devices the trainer gets the others; the task's entry (rl/sampling/rl_tasks.py) checks its own
    block and sets what follows from it (coding: the sandbox must isolate, and the trainer's valid
    vocab is the tokenizer's)."""
    config = config.copy_and_resolve_references()
    rl = config.rl
    task = rl_task(rl.task)  # an unknown name fails here, naming the known ones
    n_all = jax.device_count()
    if rl.sampler_devices and rl.mode == "threads" and not config.trainer_devices:
        config.trainer_devices = n_all - rl.sampler_devices
    check_rl(config, n_all)
    task.resolve(config)
    return config


def mtp_weight(cfg, rl) -> float:
    """The MTP self-distillation weight (rl/learning/losses.py): rl.mtp_weight, where < 0 (the
    default) means 1 when the model has MTP heads and the samplers draft with them
    (rl.speculative_k > 0), else 0. A weight > 0 on a model without MTP heads is an error
    (train/config_check.py)."""
    w = rl.mtp_weight
    if w < 0:
        return 1.0 if cfg.num_mtp_modules and rl.speculative_k else 0.0
    check_rl_mtp(rl, cfg.num_mtp_modules)
    return float(w)


def rl_loss(cfg, rl):
    """The RL policy loss (rl/learning/grpo.py) with the `rl` block's settings."""
    w = mtp_weight(cfg, rl)
    return make_rl_loss(
        model_apply(cfg),
        mtp_fn=model_mtp_apply(cfg) if w else None,
        mtp_weight=w,
        norm_tokens=rl.max_tokens,
        temperature=rl.temperature,
        tis_c=rl.tis_c,
        ppo_clip=rl.ppo_clip,
        kl_beta=rl.kl_beta,
        kl_mode=rl.kl_mode,
        uniform_beta=rl.uniform_beta,
        valid_vocab=rl.valid_vocab,
        router_replay=rl.router_replay,
    )


def build_run(config, cfg=None):
    """The trainer's Run for RL: config's mesh, optimizer and schedule, the RL loss."""
    from train import trainer

    cfg = cfg or model_config(config)
    return trainer.build(config, loss_fn=rl_loss(cfg, config.rl), cfg=cfg)


def state_and_step(config, params=None):
    """(fresh TrainState, jitted RL step) of the trainer for an RL config, on its mesh: the pieces
    `train` runs, for notebooks, benches and tests. `params` (host or device) replace the init."""
    from train import trainer

    config = resolve(config)
    run = build_run(config)
    sh = run.state_shardings()
    state = trainer.init_state(run.init_fn, run.tx, sh, run.mesh, run.rules, config.train.seed)
    if params is not None:
        # copies (may_alias=False): the step donates the state, the caller keeps `params`
        put = lambda x, s: jax.device_put(x, s, may_alias=False)
        state = state.replace(params=jax.tree.map(put, params, sh.params))
    step = trainer.jit_train_step(
        run.loss_fn,
        sh,
        run.mesh,
        run.rules,
        num_microbatches=config.train.microbatches,
        bias_update=run.bias_update,
    )
    return state, step


def train(config, workdir: str, *, log=print) -> dict:
    """Runs RL until the pool is used up, train.steps or train.max_seconds (no step starts after
    it); resumes from <workdir>. -> {'state', 'history' (host scalars per step), 'books'}."""
    from train import trainer

    config = resolve(config)  # before any model loads
    if config.rl.compile_cache:
        compile_cache(config.rl.compile_cache)
    cfg = model_config(config)
    run = build_run(config, cfg)
    source = RLBatchSource(config, workdir, cfg, start_samplers=Samplers, log=log)
    state = trainer.train(config, workdir, run=run, source=source, log=log)
    return {"state": state, "history": source.history, "books": source.books}


def main(config, workdir: str) -> None:
    """--mode=rl entry."""
    out = train(config, workdir)
    h, books = out["history"], out["books"]
    if h and jax.process_index() == 0:
        print(
            f"rl: {len(h)} steps, reward {h[0]['reward/mean']:.3f} -> {h[-1]['reward/mean']:.3f}, "
            f"{len(books.dropped)} groups dropped (stale), {books.zero_signal} zero-signal groups, "
            f"{books.skipped} skipped by rl.curriculum"
        )
