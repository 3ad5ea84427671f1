"""The one trainer: pretraining, SFT and RL run through it, each with a config, a loss and a batch
source.

    run = build(config)                                     # model, mesh, optimizer, losses
    state = train(config, workdir)                          # pretraining / SFT: data/'s pipeline
    state = train(config, workdir, run=build(config, loss_fn=rl_loss), source=rl_source)   # RL

    restore-or-init -> [source batch -> step on the mesh -> source.after_step -> log | eval | save]*

What every stage gets from here: the mesh and logical sharding rules (params created directly
sharded), optimizer roles (AdamW / Muon, train/optim.py), the LR schedule, clipping, the
non-finite-step guard, SIGTERM save (all hosts agree on the step), progress / MFU lines,
TensorBoard, multi-host batches, and exact resume: the TrainState (rng included) and the batch
source's state are saved together in one Orbax checkpoint, so a restarted run sees the same
batches and computes the same params (bitwise on CPU).

A batch source (`BatchSource`) yields host-local numpy batches (this process's rows) and has a
JSON-serializable state that lives in the checkpoint's data slot: the Grain iterator's for
pretraining/SFT (`IteratorSource`), the RL pool order and trained/dropped group ids for RL
(rl/learning/batch_source.py). `train.steps = 0` trains until the source is exhausted (constant
schedule).

No per-step host sync in the trainer itself: steps are dispatched back to back; the only value
read every step is the previous step's non-finite streak, copied to the host asynchronously while
the next step runs (a source may sync in after_step: RL publishes the new weights every step).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import model
from model import export
from model.sharding import mesh_context
from train import batches, checkpoint, optim
from train import metrics as mx
from train import sharding as shd
from train.config_check import check_config
from train.evaluate import evaluate
from train.losses import make_lm_loss
from train.model_config import model_config, model_rules  # one definition: train/model_config.py
from train.state import TrainState, create_train_state
from train.step import BiasUpdate, eval_step, router_bias_update, train_step
from train.tensorboard import SummaryWriter

InitFn = Callable[[Any], Any]  # rng -> params


class NonFiniteLossError(RuntimeError):
    pass


# --- the run: one config -> every piece a training run is wired from ---------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    config: Any  # the ml_collections run config
    cfg: model.ModelConfig
    hf_dir: str | None  # config.model was an HF folder: initial params come from it
    rules: tuple
    mesh_sizes: dict
    mesh: Mesh
    tx: optax.GradientTransformation
    schedule: optax.Schedule
    loss_fn: Callable  # (params, batch, rng) -> (loss, aux), for train_step
    eval_loss_fn: Callable  # the LM loss without MTP heads (held-out CE only)
    bias_update: BiasUpdate | None

    def init_fn(self, rng):
        return model.params.init_params_unjitted(self.cfg, rng)

    def shapes_fn(self, rng):
        """init_fn's output for jax.eval_shape only: zeros of model.param_shapes (cached per model
        config), so the abstract state costs no fresh trace of the model's init."""
        del rng
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), model.param_shapes(self.cfg))

    def logical_specs(self):
        return model.param_logical_specs(self.cfg)

    def abstract_state(self) -> TrainState:
        return abstract_state(self.shapes_fn, self.tx)

    def state_shardings(self) -> TrainState:
        return state_shardings(self.shapes_fn, self.logical_specs(), self.tx, self.mesh, self.rules)


def build_optimizer(config, cfg) -> tuple[optax.GradientTransformation, optax.Schedule]:
    t = config.train
    make_schedule = functools.partial(
        optim.make_schedule,
        kind=t.schedule,
        total_steps=t.steps,
        warmup_steps=t.warmup_steps,
        min_lr_ratio=t.min_lr_ratio,
        decay_fraction=t.wsd_decay_fraction,
    )
    schedule = make_schedule(peak_lr=t.lr)
    shapes = model.param_shapes(cfg)
    tx = optim.make_optimizer(
        params=shapes,
        logical_specs=model.param_logical_specs(cfg),
        schedule=schedule,
        optimizer=t.optimizer,
        weight_decay=t.weight_decay,
        b1=t.b1,
        b2=t.b2,
        eps=t.eps,
        clip_norm=t.clip_norm,
        moment_dtype=t.moment_dtype,
        trainable=model.trainable_mask(shapes, t.trainable),
        mtp_schedule=make_schedule(peak_lr=t.mtp_lr) if t.mtp_lr else None,
    )
    return tx, schedule


def trainer_devices(config) -> list:
    """The devices the trainer's mesh spans: all, or the first `trainer_devices` of them (a
    trainer beside samplers that hold the other devices of the same process)."""
    devices, n = jax.devices(), config.trainer_devices
    if not n:
        return devices
    if jax.process_count() > 1 or not 0 < n <= len(devices):
        raise shd.ConfigError(
            f"trainer_devices={n}: must be 0 (all) or 1..{len(devices)} in a one-process run"
        )
    return devices[:n]


def build(config, *, loss_fn: Callable | None = None, cfg: model.ModelConfig | None = None) -> Run:
    """The run's pieces. `loss_fn` (default: the LM loss with MTP heads, config.train) is the
    training loss; `cfg` replaces the config's model config (a stage that adjusts it)."""
    t = config.train
    base_cfg, hf_dir = model_config(config)
    cfg = cfg or base_cfg
    devices = trainer_devices(config)
    mesh_sizes = check_config(config, cfg, len(devices), jax.process_count())
    _check_init_params_from(config.init_params_from)  # before anything is compiled
    _check_init_tokenizer(config, cfg)
    tx, schedule = build_optimizer(config, cfg)
    loss_kw = dict(z_loss_coef=t.z_loss, use_balance_loss=t.balance_loss)
    if loss_fn is None:
        loss_fn = make_lm_loss(
            cfg,
            mtp_mode=t.mtp_mode,
            mtp_weight=t.mtp_weight,
            trainable=t.trainable,
            **loss_kw,
        )
    bias_on = cfg.num_moe_layers and t.bias_update_rate
    return Run(
        config=config,
        cfg=cfg,
        hf_dir=hf_dir,
        rules=model_rules(config),
        mesh_sizes=mesh_sizes,
        mesh=shd.make_mesh(mesh_sizes, devices),
        tx=tx,
        schedule=schedule,
        loss_fn=loss_fn,
        eval_loss_fn=make_lm_loss(cfg, mtp_mode="none", **loss_kw),
        bias_update=(
            router_bias_update(t.bias_update_rate, main=t.trainable == "all") if bias_on else None
        ),
    )


# --- state, shardings and jitted steps on a mesh ------------------------------------------------


def abstract_state(init_fn: InitFn, tx: optax.GradientTransformation) -> TrainState:
    return jax.eval_shape(
        lambda rng: create_train_state(init_fn(rng), tx, rng), jax.random.PRNGKey(0)
    )


def state_shardings(init_fn: InitFn, logical_specs: Any, tx, mesh, rules) -> TrainState:
    p_sh = shd.param_shardings(logical_specs, mesh, rules)
    return shd.state_shardings(abstract_state(init_fn, tx), p_sh, mesh)


def init_rngs(seed):
    """(params init key, state key) of a run's seed: fresh_params reproduces init_state's params."""
    return jax.random.split(jax.random.PRNGKey(seed))


def init_state(init_fn: InitFn, tx, state_sh: TrainState, mesh, rules, seed: int) -> TrainState:
    """State created directly sharded (jit with out_shardings: no full copy on one device)."""

    def init(seed_arr):
        init_rng, state_rng = init_rngs(seed_arr)
        return create_train_state(init_fn(init_rng), tx, state_rng)

    with mesh_context(mesh, rules):
        return jax.jit(init, out_shardings=state_sh)(seed)


def fresh_params(run: Run, params_sh: Any):
    """The params init_state creates for the run's seed (before any HF / exported start), on
    `params_sh`, without an optimizer state (e.g. a frozen KL reference)."""
    with mesh_context(run.mesh, run.rules):
        init = jax.jit(lambda seed: run.init_fn(init_rngs(seed)[0]), out_shardings=params_sh)
        return init(run.config.train.seed)


def jit_train_step(
    loss_fn: Callable,
    state_sh: TrainState,
    mesh,
    rules,
    *,
    num_microbatches: int = 1,
    bias_update=None,
) -> Callable:
    step = functools.partial(
        train_step, loss_fn=loss_fn, num_microbatches=num_microbatches, bias_update=bias_update
    )
    jitted = jax.jit(
        step,
        in_shardings=(state_sh, shd.batch_sharding(mesh)),
        out_shardings=(state_sh, NamedSharding(mesh, P())),
        donate_argnums=0,
    )

    def run(state, batch):
        with mesh_context(mesh, rules):
            return jitted(state, batch)

    run.jitted = jitted
    return run


def jit_eval_step(loss_fn: Callable, params_sh: Any, mesh, rules) -> Callable:
    jitted = jax.jit(
        functools.partial(eval_step, loss_fn=loss_fn),
        in_shardings=(params_sh, shd.batch_sharding(mesh)),
        out_shardings=NamedSharding(mesh, P()),
    )

    def run(params, batch):
        with mesh_context(mesh, rules):
            return jitted(params, batch)

    return run


# --- restore or init ----------------------------------------------------------------------------


def _check_init_params_from(path: str) -> None:
    if path and not os.path.isdir(os.path.join(path, "params")):
        raise shd.ConfigError(
            f"init_params_from={path!r}: not a params export (no {os.path.join(path, 'params')}; "
            "write one with --mode=convert)"
        )


def _check_init_tokenizer(config, cfg) -> None:
    """An init export that records another tokenizer than data.tokenizer (data/export_tokenizer.py)
    would be trained on ids that mean other text: refused in one line."""
    from data.export_tokenizer import tokenizer_for_export

    path = config.init_params_from
    if not path or "data" not in config:
        return
    try:
        tokenizer_for_export(path, config.data.tokenizer or "byte", cfg.vocab_size)
    except ValueError as e:
        raise shd.ConfigError(f"init_params_from={path!r} and data.tokenizer: {e}") from None


def _load_init_params(path: str, abstract_params, model_name: str):
    """Exported params (--config.init_params_from), placed on the state's shardings."""
    _check_init_params_from(path)
    try:
        return export.restore_params(path, abstract_params)
    except (ValueError, KeyError, TypeError, OSError) as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if any(m in first for m in _READ_FAILURES):
            reason = "unreadable (corrupt or truncated files?)"
        else:
            reason = f"does not fit model {model_name!r}"
        raise shd.ConfigError(f"init_params_from={path!r}: {reason} ({first})") from None


# tensorstore's words for a file it could not read, as opposed to a tree or shape mismatch
_READ_FAILURES = ("DATA_LOSS", "OUT_OF_RANGE", "Error reading", "Error opening", "corrupt")


def host_params(config, cfg) -> Any:
    """The stage's starting params on the host (what `initial_params` places on the mesh): an
    export's (config.init_params_from), an HF folder's (config.model), else the fresh init of
    train.seed. For samplers and tools that need the version-0 weights without a Run."""
    if config.init_params_from:
        _check_init_params_from(config.init_params_from)
        return export.load_params(config.init_params_from)[1]
    if os.path.isdir(config.model):
        return model.load_hf_checkpoint(config.model)[1]
    return jax.device_get(model.init_params(cfg, init_rngs(config.train.seed)[0]))


def initial_params(
    run: Run,
    params: Any,
    params_sh: Any,
    log: Callable[[str], None] = print,
    *,
    hf_params: Any = None,
):
    """The stage's starting params on `params_sh`: an HF folder's (config.model; `hf_params`:
    that folder's host params, already read), an export's (config.init_params_from), else
    `params` (the fresh sharded init) as they are."""
    if run.hf_dir is not None:
        if hf_params is None:
            hf_params = model.load_hf_checkpoint(run.hf_dir)[1]
        # Host numpy -> sharded device arrays, leaf by leaf.
        params = jax.tree.map(jax.device_put, hf_params, params_sh)
        log(f"initialized params from HF checkpoint {run.hf_dir}")
    if run.config.init_params_from:
        abstract = jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), params, params_sh
        )
        params = _load_init_params(run.config.init_params_from, abstract, run.config.model)
        log(f"initialized params from {run.config.init_params_from}")
    return params


def restore_or_init(
    run: Run, ckpt: checkpoint.Checkpointer, source, log: Callable[[str], None] = print
) -> tuple[TrainState, TrainState]:
    """(state, state shardings): the newest good checkpoint (and the batch source moved to its
    position), else a fresh sharded init with the stage's initial params (`initial_params`).
    Adam moments are zeros whatever the params, so a fresh optimizer state stays valid."""
    state_sh = run.state_shardings()
    restored = ckpt.restore_latest(run.abstract_state(), state_sh)
    if restored is not None:
        state, data_state, _ = restored
        source.set_state(data_state)
        log(f"resumed from {ckpt.directory} at step {int(state.step)}")
        return state, state_sh
    # An HF folder is read (and a damaged one refused) before the init is compiled: its errors
    # come in seconds, not after a compile (~20 s of CPU for a new model config).
    hf_params = model.load_hf_checkpoint(run.hf_dir)[1] if run.hf_dir is not None else None
    state = init_state(run.init_fn, run.tx, state_sh, run.mesh, run.rules, run.config.train.seed)
    params = initial_params(run, state.params, state_sh.params, log, hf_params=hf_params)
    return state.replace(params=params), state_sh


# --- batch sources ------------------------------------------------------------------------------


class BatchSource:
    """Where a stage's batches come from. The trainer calls, in order:

        set_state(json)            on resume: the state saved with the restored checkpoint
        start(run, state)          once, before the first step (publish weights, start samplers)
        next_batch(step)           -> this host's rows (dict of numpy [B/hosts, ...]), or None
                                   when exhausted (the run ends and saves)
        device_batch(batch)        the global batch on the mesh -> the batch the step takes
                                   (e.g. + reference logprobs computed on the mesh)
        after_step(state, step, metrics) -> host scalars to log (every step; may sync)
        get_state()                JSON, captured when a checkpoint is saved
        close()                    once, at the end (also after an error)

    `log_keys`: which of after_step's scalars the progress line shows. `give_up()` (set by the
    trainer before the first step): True once train.max_seconds is spent or a SIGTERM arrived; a
    source that waits for its batch (RL's, for groups with signal) polls it and returns None, so a
    run that gets no batch still ends on time and saves.
    """

    log_keys: tuple[str, ...] = ()

    @staticmethod
    def give_up() -> bool:
        return False

    def set_state(self, state: Any) -> None:
        raise NotImplementedError

    def get_state(self) -> Any:
        raise NotImplementedError

    def start(self, run: Run, state: TrainState) -> None:
        del run, state

    def next_batch(self, step: int) -> dict | None:
        raise NotImplementedError

    def device_batch(self, batch: dict) -> dict:
        return batch

    def after_step(self, state: TrainState, step: int, metrics: dict) -> dict:
        del state, step, metrics
        return {}

    def close(self) -> None:
        pass


class IteratorSource(BatchSource):
    """A resumable iterator (data/'s Grain pipeline, or train/synthetic_data.py's) as a source."""

    def __init__(self, it):
        self.it = it

    def set_state(self, state):
        self.it.set_state(state)

    def get_state(self):
        return self.it.get_state()

    def next_batch(self, step):
        del step
        return next(self.it)


# --- the loop -----------------------------------------------------------------------------------


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
            from jax.experimental import multihost_utils

            try:
                return bool(multihost_utils.reached_preemption_sync_point(step))
            except RuntimeError:  # the preemption service is not running (not initialized for it)
                return False
        return self.requested


class _NonFiniteWatch:
    """Stops the run after `limit` non-finite steps in a row without a sync per step.

    `push(step, streak)` starts an asynchronous copy of this step's streak and checks the previous
    step's, which has finished (or is about to) while this one was being dispatched. `check_now()`
    reads the pending one (the loop calls it where it syncs anyway: logging, saving, the end).
    """

    def __init__(self, limit: int, log, last_checkpoint: Callable[[], Any]):
        self.limit, self.log, self.last_checkpoint = limit, log, last_checkpoint
        self.pending = None  # (step, device scalar)

    def push(self, step: int, streak: jax.Array) -> None:
        streak.copy_to_host_async()
        self.check_now()
        self.pending = (step, streak)

    def check_now(self) -> None:
        if self.pending is None:
            return
        step, streak = self.pending
        self.pending = None
        streak = int(streak)
        if not streak:
            return
        self.log(f"step {step}: non-finite loss or gradient, step skipped ({streak} in a row)")
        if streak >= self.limit:
            raise NonFiniteLossError(
                f"{streak} non-finite steps in a row at step {step} "
                f"(train.max_nonfinite_in_a_row={self.limit}); last good checkpoint: "
                f"{self.last_checkpoint()}"
            )


class _Throughput:
    """Step time, tokens/s and FLOP/s over the window since the last reset (log, eval and
    checkpoint pauses and the first step's compilation are excluded by resetting after them).
    Each step adds its own batch's shape: RL batches vary in row length (rl.length_buckets), and
    attention's FLOPs per token with it."""

    def __init__(self, step: int, flops_per_token):
        self.flops_per_token = flops_per_token  # row length -> training FLOPs per token
        self.start_step, self.run_t0 = step, time.perf_counter()
        self.reset(step)

    def reset(self, step: int) -> None:
        self.t0, self.step, self.tokens, self.flops = time.perf_counter(), step, 0, 0.0

    def add(self, rows: int, row_length: int) -> None:
        self.tokens += rows * row_length
        self.flops += rows * row_length * self.flops_per_token(row_length)

    def row(self, step: int, total_steps: int) -> dict:
        now = time.perf_counter()
        # nan: no step in the window (a line right after the first step's compilation)
        dt = (now - self.t0) / (step - self.step) if step > self.step else float("nan")
        elapsed = now - self.t0 if step > self.step else float("nan")
        row = dict(
            step_time_s=dt, tokens_per_s=self.tokens / elapsed, flops_per_s=self.flops / elapsed
        )
        if total_steps:
            row["eta_s"] = (
                (now - self.run_t0) / max(step - self.start_step, 1) * (total_steps - step)
            )
        return row


def _metrics_row(m, state, step: int, run: Run, timer: _Throughput, peak) -> dict:
    """Step metrics + lr, step time, tokens/s, MFU, skipped steps and ETA (one host sync)."""
    t = run.config.train
    row = {k: float(v) for k, v in jax.device_get(m).items()}
    row.update(timer.row(step, t.steps))
    row.update(
        lr=float(run.schedule(step - 1)),
        mfu=peak.mfu(row.pop("flops_per_s")),
        mfu_peak_flops=peak.flops,
        skipped_total=float(jax.device_get(state.skipped_steps)),
    )
    return row


def _log_eval(step, result, log, writer, prefix=""):
    if not result.get("targets", 1):
        log(f"step {step}: {prefix}held-out split has no targets: evaluation skipped "
            "(more documents, or a larger data.heldout_fraction)")  # fmt: skip
        return
    bpb = f", bits/byte {result['bits_per_byte']:.4f}" if "bits_per_byte" in result else ""
    log(f"step {step}: {prefix}held-out loss {result['nll']:.4f}{bpb}")
    if writer:
        writer.scalars(
            step, {"heldout_loss": result["nll"], **{f"eval/{k}": v for k, v in result.items()}}
        )


def _evaluate_and_gate(step, params, extra, eval_fn, mesh, ls, log, final: bool) -> None:
    """Held-out evaluation (when the run has held-out batches), then the eval gate: the params are
    offered to the best-K keeper with this step's metrics (eval/* and the source's scalars)."""
    metrics = {k: float(v) for k, v in (extra or {}).items()}
    if ls["heldout"]:
        result = evaluate(eval_fn, params, ls["heldout"], mesh)
        _log_eval(step, result, log, ls["writer"], "final " if final else "")
        if result.get("targets", 1):
            metrics.update({f"eval/{k}": v for k, v in result.items()})
    keeper = ls["keeper"]
    value = metrics.get(keeper.metric, float("nan")) if keeper else float("nan")
    if keeper is None or value != value or abs(value) == float("inf"):  # nothing sound to judge
        return
    if keeper.save(step, params, metrics):
        log(
            f"step {step}: eval_gate {keeper.metric} {value:.4f}; best kept: step "
            f"{keeper.best_step()} of {keeper.all_steps()}"
        )


def check_eval_gate(config, heldout, source) -> bool:
    """Whether config.eval_gate is on (keep > 0), after checking that this run reports its metric:
    eval/nll and eval/bits_per_byte with held-out batches, and the source's log_keys."""
    gate = config.eval_gate
    if not gate.keep:
        return False
    if gate.keep < 0 or gate.mode not in ("min", "max"):
        raise shd.ConfigError(
            f"eval_gate: keep={gate.keep} must be >= 0 and mode={gate.mode!r} 'min' or 'max'"
        )
    reported = ({"eval/nll", "eval/bits_per_byte"} if heldout else set()) | set(source.log_keys)
    if gate.metric not in reported:
        raise shd.ConfigError(
            f"eval_gate.metric={gate.metric!r} is not reported by this run; it reports "
            f"{sorted(reported)} every train.eval_every steps"
        )
    return True


def best_keeper(config, workdir: str) -> checkpoint.BestCheckpoints:
    """<workdir>/best: Orbax keeps config.eval_gate.keep params checkpoints, best by its metric."""
    g = config.eval_gate
    return checkpoint.BestCheckpoints(os.path.join(workdir, "best"), g.metric, g.mode, g.keep)


def pretraining_source(config, run: Run):
    """(source, held-out batches, data counters or None) from config.data (data/'s pipeline or a
    stand-in)."""
    counters = None
    if config.data.source == "pipeline":
        from data.sources import DataCounters

        counters = DataCounters()
    train_it, heldout = batches.data_iterators(config, run.cfg.vocab_size, counters)
    return IteratorSource(train_it), heldout, counters


def train(
    config,
    workdir: str,
    *,
    run: Run | None = None,
    source: BatchSource | None = None,
    heldout: list | None = None,
    log: Callable[[str], None] = print,
    stop_after_steps: int | None = None,
) -> TrainState:
    """Runs (or resumes) training to config.train.steps (0: until the source is exhausted) or
    config.train.max_seconds; returns the final TrainState.

    `run` (default build(config)) lets a caller change a built piece, e.g. the loss; `source`
    (default: config.data's pipeline, with its held-out batches) is where batches come from;
    `heldout` batches are evaluated every train.eval_every steps (none: no evaluation).
    `stop_after_steps` ends the run early after that many steps of this invocation (tests).
    """
    max_s = config.train.max_seconds  # counted from this invocation's start
    deadline = time.monotonic() + max_s if max_s else float("inf")
    run = run or build(config)
    t = config.train
    counters = None
    if source is None:
        source, heldout, counters = pretraining_source(config, run)
    gate_on = check_eval_gate(config, heldout, source)  # before anything is written
    ckpt = checkpoint.Checkpointer(
        workdir, keep=config.checkpoint.keep, async_save=config.checkpoint.async_save
    )
    writer = keeper = None
    try:
        keeper = best_keeper(config, workdir) if gate_on else None
        state, state_sh = restore_or_init(run, ckpt, source, log)
        mesh = run.mesh
        step_fn = jit_train_step(
            run.loss_fn,
            state_sh,
            mesh,
            run.rules,
            num_microbatches=t.microbatches,
            bias_update=run.bias_update,
        )
        eval_fn = jit_eval_step(run.eval_loss_fn, state_sh.params, mesh, run.rules)
        writer = SummaryWriter(os.path.join(workdir, "tb")) if jax.process_index() == 0 else None
        # The trainer's own devices (a subset of this process's when samplers hold the rest).
        devices = None if jax.process_count() > 1 else list(mesh.devices.flat)
        peak = mx.mfu_peak(mx.peak_matmul_size(run.cfg), run.cfg.dtype, devices)
        step = int(jax.device_get(state.step))
        log(
            f"training {model.count_params(run.cfg)[0]:,} params on mesh {run.mesh_sizes} from "
            f"step {step} to {t.steps or 'the end of the batch source'}; MFU is relative to "
            f"{peak.describe()}"
            + (
                ""
                if isinstance(peak, mx.DatasheetPeak)
                else " at start, the best repetition so far"
            )
        )
        source.start(run, state)
        loop_state = dict(
            step=step, writer=writer, heldout=heldout, counters=counters, deadline=deadline
        )
        loop_state["keeper"] = keeper
        state = _loop(run, ckpt, source, state, step_fn, eval_fn, peak, loop_state, log,
                      stop_after_steps)  # fmt: skip
    finally:
        source.close()
        ckpt.wait()
        ckpt.close()
        if writer:
            writer.close()
        if keeper:
            keeper.close()
    return state


def _loop(run, ckpt, source, state, step_fn, eval_fn, peak, ls, log, stop_after_steps):
    t, config, mesh = run.config.train, run.config, run.mesh
    step, writer, heldout = ls["step"], ls["writer"], ls["heldout"]
    config_dict = config.to_dict()
    preempt = _Preemption()
    last_ckpt = lambda: ckpt.all_steps()[-1] if ckpt.all_steps() else "none"
    watch = _NonFiniteWatch(t.max_nonfinite_in_a_row, log, last_ckpt)
    timer = _Throughput(
        step, functools.partial(model.flops_per_token, run.cfg, trainable=t.trainable)
    )
    deadline = ls["deadline"]
    source.give_up = lambda: time.monotonic() >= deadline or preempt.requested
    if heldout and t.eval_at_start and step == 0:  # the stage's starting point
        _log_eval(step, evaluate(eval_fn, state.params, heldout, mesh), log, writer, "initial ")
    saved, early = step in ckpt.all_steps(), False
    while not t.steps or step < t.steps:
        local = source.next_batch(step) if time.monotonic() < deadline else None
        if local is None:  # the source is exhausted (an RL pool used up) or time is up
            if preempt.requested:
                log(f"preempted while waiting for a batch at step {step}: saving, exiting")
            break
        batch = source.device_batch(shd.global_batch(local, mesh))
        state, m = step_fn(state, batch)
        timer.add(*batch["tokens"].shape)
        step += 1
        watch.push(step, m["nonfinite_streak"])
        extra = source.after_step(state, step, m)
        if writer and extra:
            writer.scalars(step, extra)
        if step == timer.start_step + 1:  # throughput windows exclude the first compilation
            jax.block_until_ready(state)
            timer.reset(step)
        if step % t.log_every == 0 or step == t.steps:
            watch.check_now()
            row = _metrics_row(m, state, step, run, timer, peak)
            log(mx.log_line(step, t.steps, {**row, **extra}, source.log_keys, peak.describe()))
            if writer:
                writer.scalars(step, {k: v for k, v in row.items() if k != "eta_s"})
                if ls["counters"] is not None:  # documents/tokens read and skipped, per source
                    writer.scalars(
                        step, {f"data/{k}": v for k, v in ls["counters"].snapshot().items()}
                    )
            timer.reset(step)
        if (heldout or ls["keeper"]) and (step % t.eval_every == 0 or step == t.steps):
            _evaluate_and_gate(step, state.params, extra, eval_fn, mesh, ls, log, step == t.steps)
            peak.measure(1)  # a pause anyway: one more repetition, perhaps on a quieter machine
            timer.reset(step)
        stop = preempt.should_stop(step)
        saved = step % config.checkpoint.every_steps == 0 or step == t.steps or stop
        if saved:
            watch.check_now()  # a save syncs anyway; a run that must stop saves nothing more
            ckpt.save(state, source.get_state(), config_dict, force=stop)
            timer.reset(step)
        if stop:
            log(f"preempted: saved step {step}, exiting")
            break
        if stop_after_steps is not None and step - timer.start_step >= stop_after_steps:
            early = True
            break
    watch.check_now()
    if not saved and not early:  # ended between checkpoints: the source ran out, or time did
        ckpt.save(state, source.get_state(), config_dict, force=True)
    return state
