"""Learning-rate schedules and the optimizer (AdamW, or Muon for hidden 2-D matrices + AdamW).

Params stay float32 (master weights); moments are float32. Weight decay only on trainable
matrices (ndim >= 2): never on norms, biases or the MoE correction bias, which is not trained at
all (its label is 'frozen', so the optimizer outputs zero updates for it).
"""

from __future__ import annotations

from typing import Any

import jax
import optax


def make_schedule(
    *,
    kind: str,
    peak_lr: float,
    total_steps: int,
    warmup_steps: int,
    min_lr_ratio: float = 0.1,
    decay_fraction: float = 0.2,
) -> optax.Schedule:
    """'cosine': linear warmup then cosine to min; 'wsd': warmup, stable, linear decay over the
    last `decay_fraction` of steps (warmup-stable-decay, as in MiniCPM/DeepSeek); 'constant'."""
    end = peak_lr * min_lr_ratio
    warmup_steps = max(0, min(warmup_steps, total_steps))
    if kind == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, peak_lr, warmup_steps, max(total_steps, warmup_steps + 1), end
        )
    if kind == "wsd":
        decay_steps = max(1, int(round(total_steps * decay_fraction)))
        stable_steps = max(0, total_steps - warmup_steps - decay_steps)
        return optax.join_schedules(
            [
                optax.linear_schedule(0.0, peak_lr, warmup_steps),
                optax.constant_schedule(peak_lr),
                optax.linear_schedule(peak_lr, end, decay_steps),
            ],
            [warmup_steps, warmup_steps + stable_steps],
        )
    if kind == "constant":
        return optax.join_schedules(
            [optax.linear_schedule(0.0, peak_lr, warmup_steps), optax.constant_schedule(peak_lr)],
            [warmup_steps],
        )
    raise ValueError(f"train.schedule={kind!r}: expected 'cosine', 'wsd' or 'constant'")


def _path_str(path) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def param_labels(params: Any, trainable: Any, optimizer: str) -> Any:
    """'frozen' | 'muon' | 'adamw' per leaf. Muon takes hidden 2-D matrices; embeddings and
    output heads (names containing 'embed' or 'head') stay on AdamW, as in the Muon recipe."""

    def label(path, p, is_trainable):
        if not is_trainable:
            return "frozen"
        name = _path_str(path).lower()
        if optimizer == "muon" and p.ndim == 2 and "embed" not in name and "head" not in name:
            return "muon"
        return "adamw"

    return jax.tree_util.tree_map_with_path(label, params, trainable)


def make_optimizer(
    *,
    params: Any,
    trainable: Any,
    schedule: optax.Schedule,
    optimizer: str = "adamw",
    weight_decay: float = 0.1,
    b1: float = 0.9,
    b2: float = 0.95,
    eps: float = 1e-8,
    clip_norm: float | None = 1.0,
) -> optax.GradientTransformation:
    """`params` may be abstract (ShapeDtypeStruct); only ndim and paths are read."""
    if optimizer not in ("adamw", "muon"):
        raise ValueError(f"train.optimizer={optimizer!r}: expected 'adamw' or 'muon'")
    decay = jax.tree.map(lambda p, t: bool(t) and p.ndim >= 2, params, trainable)
    transforms = {
        "adamw": optax.adamw(
            schedule, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=decay
        ),
        "frozen": optax.set_to_zero(),
    }
    if optimizer == "muon":
        transforms["muon"] = optax.contrib.muon(schedule, weight_decay=weight_decay)
    labels = param_labels(params, trainable, optimizer)
    used = set(jax.tree.leaves(labels))
    transforms = {k: v for k, v in transforms.items() if k in used}
    chain = [optax.multi_transform(transforms, labels)]
    if clip_norm:
        chain.insert(0, optax.clip_by_global_norm(clip_norm))
    return optax.chain(*chain)
