"""Orbax checkpoints: TrainState + data-iterator state + run config, async, keep-N, with
fallback past a corrupted latest checkpoint, a params-only export, and the best-K params
checkpoints by an evaluation metric (`BestCheckpoints`: the trainer's `config.eval_gate`).

Layout under <workdir>/checkpoints/<step>/: state/ (Orbax PyTree), data/ (Grain's per-process
JSON files: process_<i>-of-<n>.json), config/ (JSON).

The iterator state is captured when `save` is called (not when the async write runs), so it
always matches the saved TrainState even though the loop keeps pulling batches meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import grain.checkpoint as grain_ckpt
import jax
import jax.numpy as jnp

from model.errors import ConfigError, InputError
from model.orbax_io import ocp
from train.state import TrainState

# Orbax's words when a checkpoint's tree (its params' and optimizer state's structure) is not the
# restore target's: a run of another layout wrote it, which no older checkpoint of it fixes.
_LAYOUT_MISMATCH = "tree structures do not match"


class _IteratorStateSnapshot:
    """Quacks like a Grain iterator for Grain's Orbax handler, holding a captured state.

    Grain's handler writes `get_state()` (bytes for non-DatasetIterators) on save and calls
    `set_state(bytes)` + `start_prefetch()` on restore.
    """

    def __init__(self, state: Any = None):
        self.state = state

    def get_state(self) -> bytes:
        return json.dumps(self.state).encode()

    def set_state(self, state: bytes) -> None:
        self.state = json.loads(state)

    def start_prefetch(self) -> None:
        pass


def _state_tree(state: TrainState) -> dict:
    """The arrays of a TrainState as a plain dict (the static `tx` is not saved)."""
    return {
        "step": state.step,
        "params": state.params,
        "opt_state": state.opt_state,
        "rng": state.rng,
        "skipped_steps": state.skipped_steps,
        "nonfinite_streak": state.nonfinite_streak,
    }


@jax.jit
def _copy(tree: Any) -> Any:
    """Fresh buffers with the same shardings (jitted: works on arrays spanning processes)."""
    return jax.tree.map(jnp.copy, tree)


def _abstract(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings
    )


class Checkpointer:
    def __init__(self, workdir: str, *, keep: int = 3, async_save: bool = True):
        self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=async_save
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def save(
        self, state: TrainState, data_state: Any, config: dict, *, force: bool = False
    ) -> bool:
        step = int(jax.device_get(state.step))
        tree = _state_tree(state)
        if jax.devices()[0].platform == "cpu":
            # The loop's next step donates these buffers. On CPU the "host copy" an async save
            # takes can alias device memory, so the write could read step N+1's values: give the
            # save its own buffers (one extra state copy until the write is done). Accelerators
            # copy device -> host before save() returns.
            tree = _copy(tree)
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(tree),
            data=grain_ckpt.CheckpointSave(_IteratorStateSnapshot(data_state)),
            config=ocp.args.JsonSave(config),
        )
        return self.manager.save(step, args=args, force=force)

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def restore_latest(
        self, abstract_state: TrainState, shardings: TrainState
    ) -> tuple[TrainState, Any, dict] | None:
        """Newest checkpoint that restores cleanly, or None if there is none.

        A checkpoint that fails to restore (truncated or corrupted files) is skipped with a warning
        and the one before it is tried; when none restores, InputError (starting over would
        overwrite them). One written with another state layout (a changed optimizer, moment dtype,
        MTP lr, trainable set or model) raises ConfigError at once, for the same reason.
        """
        target = _abstract(_state_tree(abstract_state), _state_tree(shardings))
        # A failed restore leaves orbax's read tasks erroring in the background; their tracebacks
        # would bury the one-line warning below.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        for step in reversed(self.all_steps()):
            try:
                restored = self.manager.restore(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(target),
                        data=grain_ckpt.CheckpointRestore(_IteratorStateSnapshot()),
                        config=ocp.args.JsonRestore(),
                    ),
                )
                tree = restored["state"]
                if int(tree["step"]) != step:
                    raise ValueError(f"checkpoint {step} holds step {int(tree['step'])}")
            except Exception as e:
                if _LAYOUT_MISMATCH in str(e):
                    raise ConfigError(
                        f"checkpoint {self.directory}/{step} holds a training state of another "
                        "layout than this run's (changed train.optimizer, train.moment_dtype, "
                        "train.mtp_lr, train.trainable or model?): resume with the config that "
                        "wrote it, or use another --workdir; nothing was overwritten"
                    ) from None
                logging.warning(
                    "checkpoint %s/%d is unreadable (%s: %s); trying the previous one",
                    self.directory,
                    step,
                    type(e).__name__,
                    str(e).splitlines()[0][:200],
                )
                continue
            state = abstract_state.replace(**tree)
            return state, restored["data"].state, dict(restored["config"])
        if self.all_steps():
            raise InputError(
                f"no checkpoint under {self.directory} restores into this run's state (steps "
                f"{self.all_steps()}: another model's shapes, or damaged files; the warnings above "
                "say which); run the config that wrote them, or use another --workdir"
            )
        return None


class BestCheckpoints:
    """Params checkpoints under `directory`, of which Orbax keeps the `keep` best by `metric`
    (Orbax's own retention: CheckpointManagerOptions.best_fn / best_mode, not a hand-rolled
    copy)."""

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
        if step in self.manager.all_steps():  # judged before a restart; the same params again
            return False
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
