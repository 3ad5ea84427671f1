"""Device mesh, logical->mesh rules, and shardings of the TrainState and batches.

Mesh axes are always (data, fsdp, expert, tensor, context); sizes come from the config, one of them
may be -1 (fills the rest). Params are placed by the model's logical specs through the config's
rules; the optimizer state mirrors its params (optax.tree_map_params); batch rows go over (data,
fsdp).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from model import sharding as model_sharding
from model.errors import ConfigError
from model.sharding import MESH_AXES

BATCH_AXES = ("data", "fsdp")


def resolve_mesh_shape(sizes: dict, num_devices: int) -> tuple[int, ...]:
    """{'data': -1, 'fsdp': 2, ...} -> concrete sizes whose product is num_devices."""
    unknown = set(sizes) - set(MESH_AXES)
    if unknown:
        raise ConfigError(f"mesh: unknown axes {sorted(unknown)}; expected {MESH_AXES}")
    shape = [int(sizes.get(a, 1)) for a in MESH_AXES]
    fills = [i for i, s in enumerate(shape) if s == -1]
    if len(fills) > 1 or any(s == 0 or s < -1 for s in shape):
        raise ConfigError(
            f"mesh {dict(zip(MESH_AXES, shape))}: sizes must be >= 1 with at most one -1"
        )
    fixed = math.prod(s for s in shape if s != -1)
    if fills:
        if num_devices % fixed:
            raise ConfigError(
                f"mesh {dict(zip(MESH_AXES, shape))}: fixed axes ({fixed}) do not divide "
                f"{num_devices} devices"
            )
        shape[fills[0]] = num_devices // fixed
    if math.prod(shape) != num_devices:
        raise ConfigError(
            f"mesh {dict(zip(MESH_AXES, shape))} has {math.prod(shape)} devices, "
            f"but {num_devices} are available"
        )
    return tuple(shape)


def make_mesh(sizes: dict, devices: Sequence[Any] | None = None) -> Mesh:
    devices = list(jax.devices() if devices is None else devices)
    shape = resolve_mesh_shape(sizes, len(devices))  # config errors in one line first
    return model_sharding.role_mesh(dict(zip(MESH_AXES, shape)), devices)


def abstract_mesh(sizes: dict, num_devices: int) -> jax.sharding.AbstractMesh:
    """A mesh described by sizes alone (for --dry_run on devices we do not have)."""
    return jax.sharding.AbstractMesh(
        resolve_mesh_shape(sizes, num_devices),
        MESH_AXES,
        axis_types=(AxisType.Auto,) * len(MESH_AXES),
    )


def rules_from_config(rules: Any) -> tuple[tuple[str, Any], ...]:
    """Config rules (list of [logical, mesh axis | list of axes | None]) -> flax rules tuple."""
    out = []
    for i, rule in enumerate(rules):
        if len(rule) != 2:
            raise ConfigError(f"rules[{i}]={rule!r}: expected (logical_name, mesh_axis)")
        name, target = rule
        targets = (target,) if isinstance(target, str) else tuple(target or ())
        bad = [t for t in targets if t not in MESH_AXES]
        if bad:
            raise ConfigError(f"rules[{i}] {name!r} -> {bad}: not a mesh axis of {MESH_AXES}")
        out.append((name, target if isinstance(target, str) or target is None else tuple(target)))
    return tuple(out)


def param_shardings(logical_specs: Any, mesh, rules) -> Any:
    return model_sharding.logical_shardings(logical_specs, mesh, rules)


def _trailing_dict_keys(path) -> tuple:
    """The param path inside an optimizer-state path: its trailing run of dict keys."""
    keys = []
    for k in reversed(path):
        if not isinstance(k, jax.tree_util.DictKey):
            break
        keys.append(k.key)
    return tuple(reversed(keys))


def state_shardings(abstract_state: Any, p_shardings: Any, mesh) -> Any:
    """Shardings for a TrainState: params by rules, optimizer moments like their params (matched
    by param path and shape), and everything else (step, counters, rng, counts) replicated."""
    replicated = NamedSharding(mesh, P())
    by_path = {}
    for (path, leaf), sh in zip(
        jax.tree_util.tree_leaves_with_path(abstract_state.params),
        jax.tree.leaves(p_shardings, is_leaf=lambda x: isinstance(x, NamedSharding)),
    ):
        by_path[_trailing_dict_keys(path)] = (leaf.shape, sh)

    def opt_leaf(path, leaf):
        shape, sh = by_path.get(_trailing_dict_keys(path), (None, replicated))
        return sh if shape == leaf.shape else replicated

    opt = jax.tree_util.tree_map_with_path(opt_leaf, abstract_state.opt_state)
    return abstract_state.replace(
        step=replicated,
        params=p_shardings,
        opt_state=opt,
        rng=replicated,
        skipped_steps=replicated,
        nonfinite_streak=replicated,
    )


def batch_sharding(mesh) -> NamedSharding:
    return NamedSharding(mesh, P(BATCH_AXES))


def global_batch(local_batch: dict, mesh) -> dict:
    """Per-host numpy slice -> global jax arrays sharded over (data, fsdp) rows."""
    sharding = batch_sharding(mesh)
    n_hosts = jax.process_count()

    def to_global(x):
        x = np.asarray(x)
        global_shape = (x.shape[0] * n_hosts,) + x.shape[1:]
        return jax.make_array_from_process_local_data(sharding, x, global_shape)

    return jax.tree.map(to_global, local_batch)


def bytes_per_device(abstract_tree: Any, shardings: Any, mesh_shape: dict) -> int:
    """Largest per-device byte count of a sharded tree, from shapes alone (allocates nothing)."""
    total = 0
    for leaf, sh in zip(
        jax.tree.leaves(abstract_tree),
        jax.tree.leaves(shardings, is_leaf=lambda x: isinstance(x, NamedSharding)),
    ):
        shape = list(leaf.shape)
        for dim, axes in enumerate(sh.spec):
            if axes is None:
                continue
            axes = (axes,) if isinstance(axes, str) else axes
            shape[dim] = -(-shape[dim] // math.prod(mesh_shape.get(a, 1) for a in axes))  # ceil
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return total
