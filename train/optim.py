"""Learning-rate schedules and the optimizer (AdamW, or Muon for weight matrices + AdamW).

Each param's treatment follows its logical role, read from its logical axis names (model/'s
param_logical_specs) and the model's trainable mask, never from its rank: params are stacked by
nn.scan ([L, ...]) and experts add an axis ([L, E, ...]), so a per-layer norm scale is 2-D and a
stacked expert matrix 4-D. Roles:
  matrix     a weight matrix of one layer/expert (>= 2 axes besides 'layers' and 'expert'):
             Muon (optimizer='muon') or AdamW, with weight decay
  embedding  the token embedding and the output head (an axis is 'vocab'): AdamW with weight
             decay, as in the Muon recipe
  vector     norm scales and biases (one axis besides 'layers'/'expert'): AdamW, no weight decay
  frozen     the MoE router correction bias (model.trainable_mask False): zero updates; the step
             moves it from expert loads instead
Muon orthogonalizes each [D_in, D_out] slice; the leading 'layers' and 'expert' axes are batch axes.
Params stay float32 (master weights); moments are float32, or bfloat16 with
moment_dtype='bfloat16' (half the optimizer bytes, as DeepSeek-V3 trains; each update is computed
in float32 from the upcast moments). Rounding to bfloat16 (8 significant bits) drops an EMA step
below ~0.2% of the moment: with b2 = 0.95 the second moment's step is 5% of (g^2 - v), so only
squared gradients within ~4% of their running mean are lost; with b2 near 1 (0.999) most steps
would be: keep float32 there.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec
from optax.contrib import MuonDimensionNumbers

import model
from model import sharding as msh


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


BATCH_AXES = (msh.LAYERS, msh.EXPERT)  # one matrix per layer and per expert
ROLES = ("matrix", "embedding", "vector", "frozen")


def _is_spec(x) -> bool:
    return isinstance(x, PartitionSpec)


def _role(spec: PartitionSpec, trainable: bool) -> str:
    if not trainable:
        return "frozen"
    axes = [a for a in spec if a not in BATCH_AXES]  # the axes of one layer's / expert's slice
    if len(axes) < 2:
        return "vector"
    return "embedding" if msh.VOCAB in axes else "matrix"


def param_roles(logical_specs: Any, trainable: Any) -> Any:
    """Pytree of ROLES, from each param's logical axis names and the trainable mask."""
    return jax.tree.map(_role, logical_specs, trainable, is_leaf=_is_spec)


def muon_dims(spec: PartitionSpec) -> MuonDimensionNumbers:
    """Which axes of a 'matrix' param are its [D_in, D_out]; the rest ('layers', 'expert') are
    batch.

    D_out is the last axis, with 'heads' when the last axis is 'head_dim' (wq_b [q_latent, heads,
    head_dim] is one [q_latent, heads*head_dim] matrix); D_in is every other non-batch axis (wo
    [heads, head_dim, embed] is one [heads*head_dim, embed] matrix).
    """
    names = list(spec)
    matrix = [i for i, a in enumerate(names) if a not in BATCH_AXES]
    out = [matrix[-1]]
    if names[out[0]] == msh.HEAD_DIM and len(matrix) > 2 and names[out[0] - 1] == msh.HEADS:
        out = [out[0] - 1, out[0]]
    return MuonDimensionNumbers(
        reduction_axis=tuple(i for i in matrix if i not in out), output_axis=tuple(out)
    )


def param_labels(roles: Any, optimizer: str) -> Any:
    """Optimizer per leaf: 'muon' | 'adamw' (with weight decay) | 'adamw_no_decay' | 'frozen'."""
    table = {
        "matrix": "muon" if optimizer == "muon" else "adamw",
        "embedding": "adamw",
        "vector": "adamw_no_decay",
        "frozen": "frozen",
    }
    return jax.tree.map(table.__getitem__, roles)


def _path_key(path) -> tuple:
    return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def make_optimizer(
    *,
    params: Any,
    logical_specs: Any,
    schedule: optax.Schedule,
    optimizer: str = "adamw",
    weight_decay: float = 0.1,
    b1: float = 0.9,
    b2: float = 0.95,
    eps: float = 1e-8,
    clip_norm: float | None = 1.0,
    trainable: Any = None,
    moment_dtype: str = "float32",
    mtp_schedule: optax.Schedule | None = None,
) -> optax.GradientTransformation:
    """`params` may be abstract (ShapeDtypeStruct); only its tree structure is read.
    `trainable` defaults to model.trainable_mask(params).

    mtp_schedule: the MTP modules' own learning rate (train.mtp_lr; None: `schedule`). Why a
    rate and not a loss weight: under Adam a parameter's step is ~lr whatever its gradient's size,
    so the only knob on how fast the draft heads follow a trunk that RL moves is their own lr
    (bench/RESULTS.md, "MTP acceptance through coding RL"). With it, the MTP leaves get their own
    transforms ('<label>_mtp'), so the optimizer state's tree differs from a run without it."""
    if optimizer not in ("adamw", "muon"):
        raise ValueError(f"train.optimizer={optimizer!r}: expected 'adamw' or 'muon'")
    if moment_dtype not in ("float32", "bfloat16"):
        raise ValueError(f"train.moment_dtype={moment_dtype!r}: expected 'float32' or 'bfloat16'")
    if trainable is None:
        trainable = model.trainable_mask(params)
    labels = param_labels(param_roles(logical_specs, trainable), optimizer)
    if mtp_schedule is not None:
        in_mtp = model.trainable_mask(params, "mtp")
        labels = jax.tree.map(lambda l, m: f"{l}_mtp" if m and l != "frozen" else l, labels, in_mtp)
    adamw = lambda wd, sched=schedule: optax.adamw(sched, b1=b1, b2=b2, eps=eps, weight_decay=wd)
    transforms = {
        "adamw": adamw(weight_decay),
        "adamw_no_decay": adamw(0.0),
        "adamw_mtp": adamw(weight_decay, mtp_schedule),
        "adamw_no_decay_mtp": adamw(0.0, mtp_schedule),
        "frozen": optax.set_to_zero(),
    }
    if optimizer == "muon":
        dims = {}
        for path, spec in jax.tree_util.tree_leaves_with_path(logical_specs, is_leaf=_is_spec):
            dims[_path_key(path)] = muon_dims(spec)
        # Inside multi_transform Muon sees only its own leaves (the rest are masked nodes).
        dims_fn = lambda p: jax.tree_util.tree_map_with_path(lambda k, _: dims[_path_key(k)], p)
        # consistent_rms=0.2 scales each orthogonalized update to AdamW's typical RMS (Moonlight,
        # arXiv:2502.16982), so one learning rate serves both optimizers.
        muon = lambda sched: optax.contrib.muon(
            sched,
            weight_decay=weight_decay,
            muon_weight_dimension_numbers=dims_fn,
            consistent_rms=0.2,
        )
        transforms.update(muon=muon(schedule), muon_mtp=muon(mtp_schedule))
    used = set(jax.tree.leaves(labels))
    transforms = {k: v for k, v in transforms.items() if k in used}
    chain = [optax.multi_transform(transforms, labels)]
    if moment_dtype != "float32":
        chain = [stored_as(chain[0], jnp.dtype(moment_dtype))]
    if clip_norm:
        chain.insert(0, optax.clip_by_global_norm(clip_norm))
    return optax.chain(*chain)


def stored_as(inner: optax.GradientTransformation, dtype) -> optax.GradientTransformation:
    """`inner` with its floating-point state held in `dtype` between steps: upcast to float32 for
    each update, rounded back after (integer state such as step counts is left alone)."""

    def cast(tree, to):
        floating = lambda x: jnp.issubdtype(x.dtype, jnp.floating)
        return jax.tree.map(lambda x: x.astype(to) if floating(x) else x, tree)

    def update(updates, state, params=None):
        new_updates, new_state = inner.update(updates, cast(state, jnp.float32), params)
        return new_updates, cast(new_state, dtype)

    return optax.GradientTransformation(lambda params: cast(inner.init(params), dtype), update)


def muon_coverage(params: Any, logical_specs: Any) -> float:
    """Fraction of parameters (by count) that Muon updates with optimizer='muon'."""
    labels = param_labels(param_roles(logical_specs, model.trainable_mask(params)), "muon")
    size = lambda x: int(np.prod(x.shape))
    total = sum(size(x) for x in jax.tree.leaves(params))
    muon = sum(
        size(x) for x, l in zip(jax.tree.leaves(params), jax.tree.leaves(labels)) if l == "muon"
    )
    return muon / total
