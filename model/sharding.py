"""Logical axis names: defined here once, mapped to mesh axes by rules from the run config.

Modules annotate params (and a few activations at block boundaries) with these names; they never
name mesh axes. `DEFAULT_RULES` maps them onto the mesh axes ('data', 'fsdp', 'expert', 'tensor',
'context'):
FSDP shards every large weight over 'fsdp' along the model dim; experts go over 'expert'; heads and
FFN width over 'tensor'; the batch over ('data', 'fsdp'); the sequence over 'context' (long-context
training: model/context.py; a size-1 axis changes nothing).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import flax.linen as nn
import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

# Parameter axes.
LAYERS = "layers"  # stacked (scanned) layer axis
VOCAB = "vocab"
EMBED = "embed"  # model dim D
HEADS = "heads"
HEAD_DIM = "head_dim"
Q_LATENT = "q_latent"  # q_lora_rank
KV_LATENT = "kv_latent"  # kv_lora_rank (+ rope dims on the kv_a output)
MLP = "mlp"  # FFN width F
EXPERT = "expert"  # E
# Activation axes.
BATCH = "batch"
SEQ = "seq"
# The positions of the decode engine's latent cache (model/engine/split.py: unmapped unless the
# engine splits its cache by sequence; no trainer rule names it).
CACHE_SEQ = "cache_seq"
ACT_EMBED = "act_embed"

# 'context' is last: positional (data, fsdp, expert, tensor) tuples still name the first four, and
# the innermost mesh axis gets the nearest devices (the context all-gather runs every layer).
MESH_AXES = ("data", "fsdp", "expert", "tensor", "context")

DEFAULT_RULES: tuple[tuple[str, object], ...] = (
    (LAYERS, None),
    (VOCAB, "tensor"),
    # Weights are FSDP-sharded over 'context' too (MaxText does the same): a context axis splits
    # activations, and without this every context shard would hold a full FSDP shard of params.
    (EMBED, ("fsdp", "context")),
    (HEADS, "tensor"),
    (HEAD_DIM, None),
    (Q_LATENT, None),
    (KV_LATENT, None),
    (MLP, "tensor"),
    (EXPERT, "expert"),
    (BATCH, ("data", "fsdp")),
    (SEQ, "context"),
    (ACT_EMBED, None),
)


def constrain(x, axes: tuple):
    """Activation sharding hint by logical names (a no-op outside a mesh + rules context)."""
    return nn.with_logical_constraint(x, axes)


# --- meshes for a role (a sampler's engine, a trainer) over a chosen device subset ----------------


def mesh_shape(sizes: dict, num_devices: int) -> tuple[int, ...]:
    """{'tensor': 2, 'expert': -1} -> sizes in MESH_AXES order (absent = 1, one -1 = the rest)
    whose product is num_devices."""
    unknown = set(sizes) - set(MESH_AXES)
    if unknown:
        raise ValueError(f"mesh sizes: unknown axes {sorted(unknown)}; expected {MESH_AXES}")
    shape = [int(sizes.get(a, 1)) for a in MESH_AXES]
    fixed = math.prod(s for s in shape if s != -1)
    if shape.count(-1) > 1 or any(s == 0 or s < -1 for s in shape) or num_devices % fixed:
        raise ValueError(f"mesh sizes {dict(sizes)} do not fit {num_devices} devices")
    shape = [num_devices // fixed if s == -1 else s for s in shape]
    if math.prod(shape) != num_devices:
        raise ValueError(
            f"mesh sizes {dict(sizes)} make {math.prod(shape)} devices, not {num_devices}"
        )
    return tuple(shape)


def role_mesh(sizes: dict, devices: Sequence) -> Mesh:
    """A (data, fsdp, expert, tensor, context) mesh over exactly `devices`, e.g. jax.devices()[4:8]
    for an engine beside a trainer on [0:4] in the same process (disjoint sets, one mesh per
    role)."""
    devices = list(devices)
    shape = mesh_shape(sizes, len(devices))
    # Auto axes, as the trainer's mesh: GSPMD propagation plus the model's logical constraints.
    return jax.make_mesh(
        shape, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices
    )


def check_model_mesh(cfg, mesh: Mesh) -> None:
    """One-line errors for a mesh the model's weights cannot be split over: tensor parallelism
    splits attention by whole heads (wq_b/wk_b/wv_b/wo's H axis), expert parallelism whole
    experts."""
    tensor, expert = mesh.shape["tensor"], mesh.shape["expert"]
    if cfg.num_attention_heads % tensor:
        raise ValueError(
            f"mesh tensor axis {tensor} does not divide "
            f"num_attention_heads={cfg.num_attention_heads}"
        )
    if cfg.n_routed_experts and cfg.n_routed_experts % expert:
        raise ValueError(
            f"mesh expert axis {expert} does not divide n_routed_experts={cfg.n_routed_experts}"
        )


def logical_shardings(logical_specs, mesh: Mesh, rules) -> object:
    """Pytree of logical PartitionSpecs -> NamedShardings on `mesh` through `rules`."""
    return jax.tree.map(
        lambda s: nn.logical_to_mesh_sharding(s, mesh, rules),
        logical_specs,
        is_leaf=lambda x: isinstance(x, PartitionSpec),
    )


def check_divisible(tree, shardings, what: str) -> None:
    """One-line error naming the first leaf of `tree` whose dims its NamedSharding cannot split
    evenly (instead of a device_put error that names no parameter)."""
    for (path, x), s in zip(
        jax.tree_util.tree_leaves_with_path(tree),
        jax.tree.leaves(shardings, is_leaf=lambda v: isinstance(v, NamedSharding)),
        strict=True,
    ):
        for dim, (size, axes) in enumerate(zip(x.shape, s.spec)):
            axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
            n = math.prod(s.mesh.shape[a] for a in axes)
            if size % n:
                raise ValueError(
                    f"{what}{jax.tree_util.keystr(path)}: dim {dim} ({size}) is not divisible by "
                    f"mesh axes {axes} ({n} devices)"
                )


def mesh_axes_of(logical: str, rules) -> tuple:
    """The mesh axes `rules` map the logical axis `logical` to, as a tuple (() if unmapped)."""
    spec = nn.logical_to_mesh_axes((logical,), rules)[0]
    if spec is None:
        return ()
    return (spec,) if isinstance(spec, str) else tuple(spec)


def normalize_rules(rules) -> tuple:
    """Rules as hashable tuples (a config may give lists): part of a compiled program's key."""
    return tuple((name, tuple(t) if isinstance(t, list) else t) for name, t in rules)


@contextlib.contextmanager
def mesh_context(mesh: Mesh, rules):
    """Trace under the mesh and logical rules so the model's activation constraints resolve."""
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        yield
