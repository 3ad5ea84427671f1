"""Evaluation inside a training or RL loop: every N steps, evaluate the current params, log the
metrics to TensorBoard and keep the best checkpoint by one metric with Orbax's own best-checkpoint
retention (CheckpointManagerOptions.best_fn / best_mode), not a hand-rolled copy.

    keeper = BestCheckpoints(os.path.join(workdir, "best"), metric="nll@128", mode="min")
    evaluate = nll_evaluator(cfg, run_config, context_lengths=(128,), batch_size=4, num_batches=4)
    for step in ...:
        maybe_evaluate(step, state.params, evaluate, every=100, writer=writer, keeper=keeper)
"""

from __future__ import annotations

import os
from collections.abc import Callable

import orbax.checkpoint as ocp


class BestCheckpoints:
    """Params checkpoints under `directory`, of which Orbax keeps the `keep` best by `metric`."""

    def __init__(self, directory: str, metric: str, mode: str = "min", keep: int = 1):
        if mode not in ("min", "max"):
            raise ValueError(f"best checkpoint mode={mode!r}: expected 'min' or 'max'")
        self.metric = metric
        options = ocp.CheckpointManagerOptions(
            best_fn=lambda metrics: float(metrics[metric]),
            best_mode=mode,
            max_to_keep=keep,
            keep_checkpoints_without_metrics=False,
            create=True,
            enable_async_checkpointing=False,
        )
        self.manager = ocp.CheckpointManager(os.path.abspath(directory), options=options)

    def save(self, step: int, params, metrics: dict) -> bool:
        if self.metric not in metrics:
            raise KeyError(f"best checkpoint metric {self.metric!r} not in {sorted(metrics)}")
        saved = self.manager.save(
            step,
            args=ocp.args.StandardSave(params),
            metrics={k: float(v) for k, v in metrics.items()},
        )
        self.manager.wait_until_finished()
        return saved

    def best_step(self) -> int | None:
        return self.manager.best_step()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def restore_best(self, abstract_params=None):
        step = self.best_step()
        if step is None:
            raise FileNotFoundError(f"no best checkpoint under {self.manager.directory}")
        return self.manager.restore(step, args=ocp.args.StandardRestore(abstract_params))

    def close(self) -> None:
        self.manager.close()


def maybe_evaluate(
    step: int,
    params,
    evaluate: Callable[[object], dict],
    *,
    every: int,
    writer=None,
    keeper: BestCheckpoints | None = None,
    log: Callable[[str], None] = print,
    prefix: str = "eval/",
) -> dict | None:
    """Evaluates on steps that are multiples of `every` (else returns None): logs the metrics,
    writes them to TensorBoard as '<prefix><name>' and offers the params to the keeper."""
    if every <= 0 or step % every:
        return None
    metrics = evaluate(params)
    log(f"step {step}: " + ", ".join(f"{k} {v:.4g}" for k, v in sorted(metrics.items())))
    if writer is not None:
        writer.scalars(step, {prefix + k: float(v) for k, v in metrics.items()})
    if keeper is not None:
        keeper.save(step, params, metrics)
    return metrics


def nll_evaluator(cfg, run_config, context_lengths, *, batch_size: int, num_batches: int):
    """evaluate(params) -> {'nll@L', 'bits_per_byte@L'} on the run's held-out split."""
    from eval.nll import heldout_nll  # pylint: disable=import-outside-toplevel

    def evaluate(params) -> dict:
        return heldout_nll(
            cfg,
            params,
            run_config,
            context_lengths,
            batch_size=batch_size,
            num_batches=num_batches,
        )[0]

    return evaluate


def agentic_evaluator(cfg, tok, tasks, *, n_samples: int = 1, ks=(1,), **policy_kwargs):
    """evaluate(params) -> the agentic suite's metrics with the model as the policy."""
    from eval import agentic  # pylint: disable=import-outside-toplevel

    def evaluate(params) -> dict:
        policy = agentic.ModelPolicy(cfg, params, tok, **policy_kwargs)
        return agentic.summarize(agentic.run_suite(policy, tasks, n_samples), ks)[0]

    return evaluate
