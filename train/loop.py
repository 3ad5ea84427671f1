"""The pretraining / SFT loop: wiring of data, jitted steps, checkpoints and logging.

Every piece it calls is pure and tested on its own; this file only sequences them:
  restore-or-init -> [batch -> step -> (log | eval | save)]* -> final save.
Exact resume: the TrainState (rng included) and the data iterator's state are saved together, so
a restarted run sees the same batches and computes the same params (bitwise on CPU).
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from train import build, checkpoint, optim, synthetic_data
from train import metrics as mx
from train import sharding as shd
from train.config_check import check_config
from train.losses import make_lm_loss
from train.model_api import ModelHandle, from_model_package
from train.step import router_bias_update
from train.tensorboard import SummaryWriter


class NonFiniteLossError(RuntimeError):
    pass


def model_handle(config) -> ModelHandle:
    """`config.model` is a preset name, or an HF checkpoint directory (params loaded from it)."""
    from model import hf, presets  # pylint: disable=import-outside-toplevel

    name = config.model
    if os.path.isdir(name):
        cfg, hf_dir = hf.read_config(name)[0], name
    else:
        try:
            cfg, hf_dir = presets.get(name), None
        except ValueError as e:
            raise shd.ConfigError(f"model={name!r}: {e}") from None
    cfg = dataclasses.replace(cfg, dtype=config.train.compute_dtype, remat=config.train.remat)
    overrides = config.get("model_overrides")
    if overrides:
        try:
            cfg = apply_model_overrides(
                cfg, overrides.to_dict() if hasattr(overrides, "to_dict") else dict(overrides)
            )
        except (TypeError, ValueError) as e:
            raise shd.ConfigError(f"model_overrides: {e}") from None
    return from_model_package(cfg, hf_dir)


def apply_model_overrides(cfg, overrides: dict):
    """cfg with ModelConfig fields replaced; `rope_scaling` (a dict) is merged into the existing
    RopeScaling, so a stage can change only the YaRN factor. Unknown fields are errors."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    for name in overrides:
        if name not in fields:
            raise ValueError(f"unknown ModelConfig field {name!r}")
    overrides = dict(overrides)
    rope = overrides.get("rope_scaling")
    if isinstance(rope, dict):
        known = {f.name for f in dataclasses.fields(cfg.rope_scaling)}
        for name in rope:
            if name not in known:
                raise ValueError(f"unknown rope_scaling field {name!r}")
        overrides["rope_scaling"] = dataclasses.replace(cfg.rope_scaling, **rope)
    return dataclasses.replace(cfg, **overrides)


def model_rules(config, handle: ModelHandle):
    if len(config.rules):
        return shd.rules_from_config(config.rules)
    from model import sharding as model_sharding  # pylint: disable=import-outside-toplevel

    return tuple(model_sharding.DEFAULT_RULES)


BATCH_KEYS = ("tokens", "targets", "segment_ids", "positions", "loss_mask")
EVAL_KEYS = BATCH_KEYS + ("target_bytes",)  # UTF-8 bytes per target, for bits per byte


def _contract_keys(it, keys=BATCH_KEYS):
    """The batch contract's keys only (held-out batches also keep target_bytes)."""
    for batch in it:
        yield {k: batch[k] for k in keys if k in batch}


class _KeyFilter:
    """Wraps a grain iterator: same get_state/set_state, batches restricted to BATCH_KEYS."""

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        batch = next(self.it)
        return {k: batch[k] for k in BATCH_KEYS}

    def get_state(self):
        return self.it.get_state()

    def set_state(self, state):
        self.it.set_state(state)


def data_iterators(config, vocab_size: int, counters=None):
    """(train iterator for this host, list of held-out batches for this host).

    'pipeline' is data/'s Grain pipeline (sources, packing, mixing, host sharding); 'synthetic'
    and 'local_text' are the small stand-ins in train/synthetic_data.py (tests, offline demos).
    """
    t, d = config.train, config.data
    if d.source == "pipeline":
        from data import pipeline  # pylint: disable=import-outside-toplevel
        from data.tokenizers import load_tokenizer  # pylint: disable=import-outside-toplevel

        try:
            dcfg = pipeline.DataConfig.from_dict(
                dict(
                    sources=[dict(s) for s in d.sources],
                    tokenizer=d.tokenizer,
                    seq_len=t.seq_len,
                    global_batch_size=t.batch_size,
                    seed=t.seed,
                    held_out_fraction=d.heldout_fraction,
                    strict=d.strict,
                    avoid_splitting=d.avoid_splitting,
                )
            )
            tok = load_tokenizer(dcfg.tokenizer)
        except (ValueError, OSError) as e:
            raise shd.ConfigError(f"data: {e}") from None
        if tok.vocab_size > vocab_size:
            raise shd.ConfigError(
                f"data.tokenizer has {tok.vocab_size} ids but the model vocab_size is {vocab_size}"
            )
        train_it = _KeyFilter(pipeline.train_iterator(dcfg, counters, tok))
        heldout = list(
            _contract_keys(
                pipeline.held_out_batches(dcfg, counters, tok, num_batches=t.eval_batches),
                EVAL_KEYS,
            )
        )
        return train_it, heldout
    if d.source == "synthetic":
        tokens = synthetic_data.synthetic_tokens(200_000, vocab_size, t.seed)
    elif d.source == "local_text":
        tokens = synthetic_data.local_text_tokens(d.max_bytes)
    else:
        raise shd.ConfigError(
            f"data.source={d.source!r}: expected 'pipeline', 'local_text' or 'synthetic'"
        )
    cut = int(len(tokens) * (1 - d.heldout_fraction))
    shard = dict(shard_index=jax.process_index(), shard_count=jax.process_count())
    train_it = synthetic_data.lm_batches(
        tokens[:cut], batch_size=t.batch_size, seq_len=t.seq_len, seed=t.seed, **shard
    )
    heldout_it = synthetic_data.lm_batches(
        tokens[cut:], batch_size=t.batch_size, seq_len=t.seq_len, seed=0, shuffle=False, **shard
    )
    return train_it, [next(heldout_it) for _ in range(t.eval_batches)]


class _Preemption:
    """SIGTERM sets a flag; the loop saves and exits at the next step boundary. With several
    processes JAX's own preemption sync point makes all hosts agree on the step."""

    def __init__(self):
        self.requested = False
        if jax.process_count() == 1:
            signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        del signum, frame
        self.requested = True

    def should_stop(self, step: int) -> bool:
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

            try:
                return bool(multihost_utils.reached_preemption_sync_point(step))
            except RuntimeError:  # the preemption service is not running (not initialized for it)
                return False
        return self.requested


def build_optimizer(config, handle: ModelHandle):
    t = config.train
    schedule = optim.make_schedule(
        kind=t.schedule,
        peak_lr=t.lr,
        total_steps=t.steps,
        warmup_steps=t.warmup_steps,
        min_lr_ratio=t.min_lr_ratio,
        decay_fraction=t.wsd_decay_fraction,
    )
    abstract_params = jax.eval_shape(handle.init_params, jax.random.PRNGKey(0))
    tx = optim.make_optimizer(
        params=abstract_params,
        trainable=handle.trainable_mask(abstract_params),
        schedule=schedule,
        optimizer=t.optimizer,
        weight_decay=t.weight_decay,
        b1=t.b1,
        b2=t.b2,
        eps=t.eps,
        clip_norm=t.clip_norm,
    )
    return tx, schedule


def evaluate(eval_fn, params, batches, mesh) -> dict[str, float]:
    """Held-out {'nll': mean next-token NLL (nats), 'bits_per_byte'} over masked targets.

    bits/byte = sum(nll * mask) / ln 2 / sum(target_bytes * mask): tokenizer-independent, so stages
    and tokenizers compare. Without target_bytes in the batches (stand-in data) it is left out.
    Byte sums are taken on the host batches: with several hosts each holds its own part, so they
    are added across processes like the device sums are.
    """
    nll_sum = weight = byte_sum = 0.0
    with_bytes = bool(batches) and all("target_bytes" in b for b in batches)
    for b in batches:
        model_batch = {k: b[k] for k in BATCH_KEYS}
        s = jax.device_get(eval_fn(params, shd.global_batch(model_batch, mesh)))
        nll_sum, weight = nll_sum + float(s["ce_sum"]), weight + float(s["weight"])
        if with_bytes:
            byte_sum += float(np.sum(np.asarray(b["target_bytes"], np.float64) * b["loss_mask"]))
    if with_bytes and jax.process_count() > 1:
        from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel

        byte_sum = float(np.sum(multihost_utils.process_allgather(np.float64(byte_sum))))
    out = {"nll": nll_sum / max(weight, 1.0)}
    if with_bytes:
        out["bits_per_byte"] = nll_sum / math.log(2) / max(byte_sum, 1.0)
    return out


def _log_eval(step, result, log, writer, prefix=""):
    bpb = f", bits/byte {result['bits_per_byte']:.4f}" if "bits_per_byte" in result else ""
    log(f"step {step}: {prefix}held-out loss {result['nll']:.4f}{bpb}")
    if writer:
        writer.scalars(
            step, {"heldout_loss": result["nll"], **{f"eval/{k}": v for k, v in result.items()}}
        )


def _metrics_row(
    m, state, step, start_step, window_t0, window_step, run_t0, t, schedule, flops_per_token, peak
) -> dict:
    """Step metrics + lr, step time and tokens/s over the window since the last log, MFU, ETA."""
    now = time.perf_counter()
    dt = (now - window_t0) / max(step - window_step, 1)
    tps = t.batch_size * t.seq_len / dt
    row = {k: float(v) for k, v in jax.device_get(m).items()}
    row.update(
        lr=float(schedule(step - 1)),
        step_time_s=dt,
        tokens_per_s=tps,
        mfu=mx.mfu(tps, flops_per_token, peak),
        skipped_total=float(jax.device_get(state.skipped_steps)),
        eta_s=(now - run_t0) / (step - start_step) * (t.steps - step),
    )
    return row


def restore_or_init(
    config, handle: ModelHandle, tx, mesh, rules, ckpt, train_it, log: Callable[[str], None] = print
):
    """(state, state shardings): the newest good checkpoint (and the data iterator moved to its
    position), else a fresh sharded init, with params from an HF folder (config.model) or an
    exported params checkpoint (config.init_params_from) when given."""
    state_sh = build.state_shardings(handle, tx, mesh, rules)
    restored = ckpt.restore_latest(build.abstract_state(handle, tx), state_sh)
    if restored is not None:
        state, data_state, _ = restored
        train_it.set_state(data_state)
        log(f"resumed from {ckpt.directory} at step {int(state.step)}")
        return state, state_sh
    state, _ = build.init_state(handle, tx, mesh, rules, config.train.seed)
    if handle.hf_params is not None:
        # Host numpy -> sharded device arrays, leaf by leaf. Adam moments are zeros whatever the
        # params, so the freshly initialized optimizer state stays valid.
        state = state.replace(
            params=jax.tree.map(jax.device_put, handle.hf_params(), state_sh.params)
        )
        log(f"initialized params from HF checkpoint {config.model}")
    if config.init_params_from:
        params = checkpoint.load_params(
            config.init_params_from,
            jax.tree.map(
                lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                state.params,
                state_sh.params,
            ),
        )
        state = state.replace(params=params)
        log(f"initialized params from {config.init_params_from}")
    return state, state_sh


def train(
    config,
    workdir: str,
    *,
    handle: ModelHandle | None = None,
    rules=None,
    log: Callable[[str], None] = print,
    stop_after_steps: int | None = None,
) -> Any:
    """Runs (or resumes) training to config.train.steps; returns the final TrainState.

    `stop_after_steps` ends the run early after that many steps of this invocation (tests).
    """
    t = config.train
    handle = handle or model_handle(config)
    rules = rules if rules is not None else model_rules(config, handle)
    mesh_sizes = check_config(config, handle.cfg, jax.device_count(), jax.process_count())
    mesh = shd.make_mesh(mesh_sizes)
    tx, schedule = build_optimizer(config, handle)
    loss_fn = make_lm_loss(
        handle.apply,
        mtp_mode=t.mtp_mode,
        mtp_weight=t.mtp_weight,
        z_loss_coef=t.z_loss,
        use_balance_loss=t.balance_loss,
    )
    bias_update = None
    if handle.update_router_bias is not None and t.bias_update_rate:
        bias_update = router_bias_update(handle.update_router_bias, t.bias_update_rate)
    counters = None
    if config.data.source == "pipeline":
        from data.sources import DataCounters  # pylint: disable=import-outside-toplevel

        counters = DataCounters()
    train_it, heldout = data_iterators(config, handle.cfg.vocab_size, counters)
    ckpt = checkpoint.Checkpointer(
        workdir, keep=config.checkpoint.keep, async_save=config.checkpoint.async_save
    )
    state, state_sh = restore_or_init(config, handle, tx, mesh, rules, ckpt, train_it, log)

    step_fn = build.jit_train_step(
        loss_fn, state_sh, mesh, rules, num_microbatches=t.microbatches, bias_update=bias_update
    )
    eval_fn = build.jit_eval_step(loss_fn, state_sh.params, mesh, rules)
    writer = SummaryWriter(os.path.join(workdir, "tb")) if jax.process_index() == 0 else None
    flops_per_token = handle.flops_per_token(t.seq_len)
    peak = mx.measure_matmul_peak_all()
    config_dict = config.to_dict()
    preempt = _Preemption()
    step = int(jax.device_get(state.step))
    start_step, window_t0, window_step = step, time.perf_counter(), step
    run_t0 = time.perf_counter()
    log(
        f"training {handle.count_params()[0]:,} params on mesh {mesh_sizes} from step {step} "
        f"to {t.steps}; matmul peak {peak / 1e9:.1f} GFLOP/s (all devices)"
    )
    if t.get("eval_at_start") and step == 0:  # the stage's starting point on its own held-out data
        _log_eval(step, evaluate(eval_fn, state.params, heldout, mesh), log, writer, "initial ")
    try:
        while step < t.steps:
            batch = shd.global_batch(next(train_it), mesh)
            state, m = step_fn(state, batch)
            step += 1
            if step == start_step + 1:  # throughput windows exclude the first step's compilation
                jax.block_until_ready(state)
                window_t0, window_step = time.perf_counter(), step
            streak = int(m["nonfinite_streak"])
            if streak:
                log(f"step {step}: non-finite loss or gradient, step skipped ({streak} in a row)")
                if streak >= t.max_nonfinite_in_a_row:
                    raise NonFiniteLossError(
                        f"{streak} non-finite steps in a row at step {step} "
                        f"(train.max_nonfinite_in_a_row={t.max_nonfinite_in_a_row}); last good "
                        f"checkpoint: {ckpt.all_steps()[-1] if ckpt.all_steps() else 'none'}"
                    )
            if step % t.log_every == 0 or step == t.steps:
                row = _metrics_row(
                    m,
                    state,
                    step,
                    start_step,
                    window_t0,
                    window_step,
                    run_t0,
                    t,
                    schedule,
                    flops_per_token,
                    peak,
                )
                log(mx.log_line(step, t.steps, row))
                if writer:
                    writer.scalars(step, {k: v for k, v in row.items() if k != "eta_s"})
                    if counters is not None:  # documents/tokens read and skipped, per source
                        writer.scalars(
                            step, {f"data/{k}": v for k, v in counters.snapshot().items()}
                        )
                window_t0, window_step = time.perf_counter(), step
            if step % t.eval_every == 0 or step == t.steps:
                _log_eval(
                    step,
                    evaluate(eval_fn, state.params, heldout, mesh),
                    log,
                    writer,
                    "final " if step == t.steps else "",
                )
                window_t0, window_step = time.perf_counter(), step  # throughput excludes eval
            stop = preempt.should_stop(step)
            if step % config.checkpoint.every_steps == 0 or step == t.steps or stop:
                ckpt.save(state, train_it.get_state(), config_dict, force=stop)
                window_t0, window_step = time.perf_counter(), step  # and checkpoint copies
            if stop:
                log(f"preempted: saved step {step}, exiting")
                break
            if stop_after_steps is not None and step - start_step >= stop_after_steps:
                break
    finally:
        ckpt.wait()
        ckpt.close()
        if writer:
            writer.close()
    return state
