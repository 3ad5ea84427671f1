"""The pretraining / SFT loop: sequences a built run's pieces, nothing more.

    restore-or-init -> [batch -> step -> (log | eval | save)]* -> final save

The pieces come from train/run.py (`build`: model, mesh, optimizer, losses), train/batches.py
(iterators) and train/evaluate.py (held-out NLL). Exact resume: the TrainState (rng included) and
the data iterator's state are saved together, so a restarted run sees the same batches and
computes the same params (bitwise on CPU).

No per-step host sync: steps are dispatched back to back; the only value read every step is the
previous step's non-finite streak, copied to the host asynchronously while the next step runs.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import jax

import model
from train import batches, build, checkpoint
from train import metrics as mx
from train import sharding as shd
from train.evaluate import evaluate
from train.run import Run, restore_or_init
from train.run import build as build_run
from train.tensorboard import SummaryWriter


class NonFiniteLossError(RuntimeError):
    pass


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
    """Step time and tokens/s over the window since the last reset (log, eval and checkpoint
    pauses and the first step's compilation are excluded by resetting after them)."""

    def __init__(self, step: int, tokens_per_step: int):
        self.tokens_per_step = tokens_per_step
        self.start_step, self.run_t0 = step, time.perf_counter()
        self.reset(step)

    def reset(self, step: int) -> None:
        self.t0, self.step = time.perf_counter(), step

    def row(self, step: int, total_steps: int) -> dict:
        now = time.perf_counter()
        dt = (now - self.t0) / max(step - self.step, 1)
        eta = (now - self.run_t0) / max(step - self.start_step, 1) * (total_steps - step)
        return dict(step_time_s=dt, tokens_per_s=self.tokens_per_step / dt, eta_s=eta)


def _metrics_row(m, state, step: int, run: Run, timer: _Throughput, peak: float) -> dict:
    """Step metrics + lr, step time, tokens/s, MFU, skipped steps and ETA (one host sync)."""
    t = run.config.train
    row = {k: float(v) for k, v in jax.device_get(m).items()}
    row.update(timer.row(step, t.steps))
    flops = model.flops_per_token(run.cfg, t.seq_len)
    row.update(
        lr=float(run.schedule(step - 1)),
        mfu=mx.mfu(row["tokens_per_s"], flops, peak),
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


def train(
    config,
    workdir: str,
    *,
    run: Run | None = None,
    log: Callable[[str], None] = print,
    stop_after_steps: int | None = None,
) -> Any:
    """Runs (or resumes) training to config.train.steps; returns the final TrainState.

    `run` (default build(config)) lets a caller change a built piece, e.g. the loss.
    `stop_after_steps` ends the run early after that many steps of this invocation (tests).
    """
    run = run or build_run(config)
    t = config.train
    counters = None
    if config.data.source == "pipeline":
        from data.sources import DataCounters  # pylint: disable=import-outside-toplevel

        counters = DataCounters()
    train_it, heldout = batches.data_iterators(config, run.cfg.vocab_size, counters)
    ckpt = checkpoint.Checkpointer(
        workdir, keep=config.checkpoint.keep, async_save=config.checkpoint.async_save
    )
    state, state_sh = restore_or_init(run, ckpt, train_it, log)
    mesh = run.mesh
    step_fn = build.jit_train_step(
        run.loss_fn,
        state_sh,
        mesh,
        run.rules,
        num_microbatches=t.microbatches,
        bias_update=run.bias_update,
    )
    eval_fn = build.jit_eval_step(run.eval_loss_fn, state_sh.params, mesh, run.rules)
    writer = SummaryWriter(os.path.join(workdir, "tb")) if jax.process_index() == 0 else None
    peak = mx.matmul_peak()
    config_dict = config.to_dict()
    preempt = _Preemption()
    last_ckpt = lambda: ckpt.all_steps()[-1] if ckpt.all_steps() else "none"
    watch = _NonFiniteWatch(t.max_nonfinite_in_a_row, log, last_ckpt)
    step = int(jax.device_get(state.step))
    timer = _Throughput(step, t.batch_size * t.seq_len)
    log(
        f"training {model.count_params(run.cfg)[0]:,} params on mesh {run.mesh_sizes} from step "
        f"{step} to {t.steps}; matmul peak {peak / 1e9:.1f} GFLOP/s (all devices)"
    )
    if t.get("eval_at_start") and step == 0:  # the stage's starting point on its own held-out data
        _log_eval(step, evaluate(eval_fn, state.params, heldout, mesh), log, writer, "initial ")
    try:
        while step < t.steps:
            state, m = step_fn(state, shd.global_batch(next(train_it), mesh))
            step += 1
            watch.push(step, m["nonfinite_streak"])
            if step == timer.start_step + 1:  # throughput windows exclude the first compilation
                jax.block_until_ready(state)
                timer.reset(step)
            if step % t.log_every == 0 or step == t.steps:
                watch.check_now()
                row = _metrics_row(m, state, step, run, timer, peak)
                log(mx.log_line(step, t.steps, row))
                if writer:
                    writer.scalars(step, {k: v for k, v in row.items() if k != "eta_s"})
                    if counters is not None:  # documents/tokens read and skipped, per source
                        writer.scalars(
                            step, {f"data/{k}": v for k, v in counters.snapshot().items()}
                        )
                timer.reset(step)
            if step % t.eval_every == 0 or step == t.steps:
                prefix = "final " if step == t.steps else ""
                _log_eval(step, evaluate(eval_fn, state.params, heldout, mesh), log, writer, prefix)
                timer.reset(step)
            stop = preempt.should_stop(step)
            if step % config.checkpoint.every_steps == 0 or step == t.steps or stop:
                watch.check_now()  # a save syncs anyway; a run that must stop saves nothing more
                ckpt.save(state, train_it.get_state(), config_dict, force=stop)
                timer.reset(step)
            if stop:
                log(f"preempted: saved step {step}, exiting")
                break
            if stop_after_steps is not None and step - timer.start_step >= stop_after_steps:
                break
        watch.check_now()
    finally:
        ckpt.wait()
        ckpt.close()
        if writer:
            writer.close()
    return state
