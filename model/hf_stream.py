"""Streamed, sharded HF loading and export: each host reads only the tensors its devices need,
each once, and places only its devices' slices; the export gathers one tensor at a time to the
writing process. The full model never exists in one host's memory.

    cfg, params = load_hf_checkpoint_sharded("path/to/hf_dir", mesh, rules)
    save_hf_checkpoint_sharded(cfg, params, "out_dir")   # the files save_hf_checkpoint writes

Params come back as global jax.Arrays laid out by the model's logical specs and `rules` on `mesh`
(multi-process: every process calls this with the same arguments). Host memory beyond what the
devices hold stays at about one checkpoint tensor (read with pread, not kept mapped) plus this
host's slice of one (leaf, layer) piece being staged:

  for each stacked leaf (e.g. moe_layers/moe/wi_gate [L, E, D, F]): allocate it sharded (zeros),
  then per layer l: stage this host's devices' slices of the [E, D, F] piece from the HF tensors
  that cover them (for experts: one [F, D] tensor per expert, read only when a local device owns
  that expert), assemble the piece from per-device arrays, and write it into row l of the leaf
  with a donated dynamic_update_slice (in place on every device).

Conversions (transposes, head splits, rope row order, FP8 dequantization) are those of model/hf.py,
so the result is bitwise equal to `load_hf_checkpoint` placed on the same mesh.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import struct
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from model import hf
from model.params import param_logical_specs, param_shapes


def _norm_index(index: tuple, shape: tuple) -> tuple:
    """Device index (tuple of slices) -> hashable ((start, stop), ...)."""
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


class _Stage:
    """This host's slices of one array, staged in numpy (one buffer per distinct device slice)."""

    def __init__(self, shape: tuple, sharding):
        self.shape, self.sharding = tuple(shape), sharding
        self.device_index = {
            d: _norm_index(i, self.shape)
            for d, i in sharding.addressable_devices_indices_map(self.shape).items()
        }
        self.buffers = {
            k: np.empty([b - a for a, b in k], np.float32) for k in set(self.device_index.values())
        }

    def rows_needed(self) -> list[int]:
        """Indices along axis 0 that some local device holds."""
        return sorted({r for k in self.buffers for r in range(*k[0])})

    def write(self, value: np.ndarray) -> None:
        for k, buf in self.buffers.items():
            buf[...] = value[tuple(slice(a, b) for a, b in k)]

    def write_row(self, row: int, value: np.ndarray) -> None:
        """value: the full [*shape[1:]] slab at index `row` of axis 0."""
        for k, buf in self.buffers.items():
            (a, b), rest = k[0], k[1:]
            if a <= row < b:
                buf[row - a] = value[tuple(slice(s, e) for s, e in rest)]

    def array(self) -> jax.Array:
        shards = [jax.device_put(self.buffers[k], d) for d, k in self.device_index.items()]
        self.buffers = {}
        return jax.make_array_from_single_device_arrays(self.shape, self.sharding, shards)


def _zeros(shape: tuple, sharding) -> jax.Array:
    """Zeros laid out by `sharding`, one device buffer at a time (no compiled program)."""
    return jax.make_array_from_callback(
        shape, sharding, lambda i: np.zeros([b - a for a, b in _norm_index(i, shape)], np.float32)
    )


@functools.cache
def _set_row(shape: tuple, sharding):
    """Compiled: leaf [L, ...] with row i replaced by piece [...], in place (the leaf is donated).
    Compiled ahead of time (`prepare`), so the load's host memory is not mixed with XLA's."""
    piece_sh = _piece_sharding(sharding)
    fn = jax.jit(
        lambda leaf, piece, i: jax.lax.dynamic_update_index_in_dim(leaf, piece, i, 0),
        donate_argnums=0,
        out_shardings=sharding,
    )
    replicated = NamedSharding(sharding.mesh, P())
    return fn.lower(
        jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sharding),
        jax.ShapeDtypeStruct(shape[1:], jnp.float32, sharding=piece_sh),
        jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
    ).compile()


def _row_index(row: int, mesh) -> jax.Array:
    sharding = NamedSharding(mesh, P())
    return jax.make_array_from_callback((), sharding, lambda _: np.asarray(row, np.int32))


def _shardings(cfg, mesh, rules):
    to_sharding = lambda s: nn.logical_to_mesh_sharding(s, mesh, rules)
    return jax.tree.map(to_sharding, param_logical_specs(cfg), is_leaf=lambda x: isinstance(x, P))


def prepare(cfg, mesh, rules) -> int:
    """Compiles the row-update programs of every stacked leaf (XLA's compile memory is a fixed
    cost per architecture and mesh, ~5 MB a program on CPU); returns how many distinct ones."""
    sh_tree, shapes = _shardings(cfg, mesh, rules), param_shapes(cfg)
    for stack in ("dense_layers", "moe_layers"):
        if stack in shapes:
            for s, sh in zip(jax.tree.leaves(shapes[stack]), jax.tree.leaves(sh_tree[stack])):
                _set_row(tuple(s.shape), sh)
    return _set_row.cache_info().currsize


def _piece_sharding(sharding: NamedSharding) -> NamedSharding:
    """A stacked leaf's sharding without its leading (layers) axis."""
    return NamedSharding(sharding.mesh, P(*tuple(sharding.spec)[1:]))


def _get(tree: dict, path: tuple):
    for p in path:
        tree = tree[p]
    return tree


def _entry_values(cfg, src, prefix, entry, interleaved) -> list[np.ndarray]:
    """A non-expert entry's converted value(s), one per leaf path (model/hf.py's conversions)."""
    _, hf_name, shape, to_ours, _ = entry
    value = src.get(prefix + hf_name, shape)
    if not interleaved:
        value = hf.rope_rows_to_interleaved(cfg, hf_name, value)
    value = to_ours(value) if to_ours else value
    return list(value) if isinstance(value, tuple) else [value]


def _load_block(cfg, src, i, moe, interleaved, shardings, shapes, put) -> None:
    """One decoder block (layer index i in the checkpoint): put(leaf_path, array piece) per leaf."""
    prefix = hf.layer_prefix(i)
    for entry in hf.layer_entries(cfg, moe):
        path, hf_name, shape = entry[:3]
        if isinstance(hf_name, list):  # routed experts: one [F, D] / [D, F] tensor per expert
            leaf = hf.leaf_paths(path)[0]
            stage = _Stage(shapes(leaf), shardings(leaf))
            needed = set(stage.rows_needed())
            for e, name in enumerate(hf_name):
                if e in needed:
                    stage.write_row(e, src.get(prefix + name, shape).T)
                else:
                    src.claim(prefix + name)
            put(leaf, stage.array())
            continue
        for leaf, value in zip(
            hf.leaf_paths(path), _entry_values(cfg, src, prefix, entry, interleaved)
        ):
            stage = _Stage(shapes(leaf), shardings(leaf))
            stage.write(value)
            put(leaf, stage.array())


def load_hf_checkpoint_sharded(path: str, mesh, rules, **config_overrides: Any) -> tuple[Any, dict]:
    """-> (cfg, params as global jax.Arrays sharded by the model's logical specs on `mesh`)."""
    cfg, extras = hf.read_config(path)
    if config_overrides:
        cfg = cfg.replace(**config_overrides)
    src = hf.TensorSource(path, extras["fp8_block"], stream=True)
    interleaved = extras["rope_interleave"]
    sh_tree, shapes = _shardings(cfg, mesh, rules), param_shapes(cfg)
    d, vocab = cfg.hidden_size, cfg.vocab_size

    def place(leaf_path: tuple, value: np.ndarray) -> jax.Array:
        stage = _Stage(value.shape, _get(sh_tree, leaf_path))
        stage.write(value)
        return stage.array()

    params: dict = {
        "embed": place(("embed",), src.get("model.embed_tokens.weight", (vocab, d))),
        "final_norm": {"scale": place(("final_norm", "scale"), src.get("model.norm.weight", (d,)))},
    }
    if not cfg.tie_word_embeddings:
        params["lm_head"] = place(("lm_head",), src.get("lm_head.weight", (vocab, d)).T)
    for stack, first, last, moe in (
        ("dense_layers", 0, cfg.num_dense_layers, False),
        ("moe_layers", cfg.num_dense_layers, cfg.num_hidden_layers, True),
    ):
        if last > first:
            params[stack] = _load_stack(
                cfg, src, stack, first, last, moe, interleaved, sh_tree, shapes
            )
    for m in range(cfg.num_mtp_modules):
        params[f"mtp_{m}"] = _load_mtp(cfg, src, m, interleaved, sh_tree[f"mtp_{m}"], place)
    src.report_unused()
    return cfg, params


def _load_stack(cfg, src, stack, first, last, moe, interleaved, sh_tree, shapes) -> dict:
    """A scanned stack [L, ...]: leaves allocated sharded, then filled one layer row at a time."""
    stack_sh, stack_shapes = sh_tree[stack], shapes[stack]
    leaves = jax.tree.map(
        lambda s, sh: _zeros(tuple(s.shape), sh), stack_shapes, stack_sh,
        is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct),
    )  # fmt: skip
    for row, i in enumerate(range(first, last)):
        index = _row_index(row, jax.tree.leaves(stack_sh)[0].mesh)

        def put(leaf_path, piece, index=index):
            parent, name = _get(leaves, leaf_path[:-1]), leaf_path[-1]
            update = _set_row(parent[name].shape, _get(stack_sh, leaf_path))
            parent[name] = update(parent[name], piece, index)

        _load_block(
            cfg, src, i, moe, interleaved,
            lambda p: _piece_sharding(_get(stack_sh, p)),
            lambda p: tuple(_get(stack_shapes, p).shape[1:]),
            put,
        )  # fmt: skip
    return leaves


def _load_mtp(cfg, src, m, interleaved, sh_tree, place) -> dict:
    i, d = cfg.num_hidden_layers + m, cfg.hidden_size
    p = hf.layer_prefix(i)
    for shared in ("embed_tokens.weight", "shared_head.head.weight"):  # shared with the main model
        if p + shared in src:
            src.claim(p + shared)
    mtp_shapes = param_shapes(cfg)[f"mtp_{m}"]
    block: dict = {}

    def put(leaf_path, piece):
        parent = block
        for k in leaf_path[:-1]:
            parent = parent.setdefault(k, {})
        parent[leaf_path[-1]] = piece

    _load_block(
        cfg, src, i, cfg.mtp_is_moe, interleaved,
        lambda q: _get(sh_tree["block"], q),
        lambda q: tuple(_get(mtp_shapes["block"], q).shape),
        put,
    )  # fmt: skip
    norm = lambda name, hf_name: {
        "scale": place((f"mtp_{m}", name, "scale"), src.get(p + hf_name, (d,)))
    }
    return {
        "enorm": norm("enorm", "enorm.weight"),
        "hnorm": norm("hnorm", "hnorm.weight"),
        "eh_proj": place((f"mtp_{m}", "eh_proj"), src.get(p + "eh_proj.weight", (d, 2 * d)).T),
        "head_norm": norm("head_norm", "shared_head.norm.weight"),
        "block": block,
    }


# --- streamed export ----------------------------------------------------------------------------
# save_hf_checkpoint_sharded(cfg, params, path): the files of model/hf.py's save_hf_checkpoint
# (same names, shards, bytes), written by process 0 from params that are global jax.Arrays
# (possibly spanning processes). The shard files are planned from the config's shapes, so each
# safetensors header (JSON of dtype/shape/offsets) is written before any data; then each HF
# tensor (one layer's or one expert's slice of a stacked leaf) is gathered alone to every process
# by one compiled program (every process runs the same sequence of programs; only process 0
# keeps the bytes) and appended. Host memory: one gathered piece (and its converted copy) at a
# time, plus the piece's replicas on the local devices while it is being fetched.


def _replicated(sharding) -> jax.sharding.Sharding:
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, P())
    if len(sharding.device_set) == 1:
        return sharding
    raise ValueError(f"HF export: params sharded by {type(sharding).__name__} (need NamedSharding)")


@functools.cache
def _gather(shape: tuple, dtype, sharding, depth: int):
    """Compiled: leaf[i_0, ..., i_{depth-1}] replicated on every device (indices are traced, so
    one program serves every layer/expert of a leaf)."""
    out = _replicated(sharding)

    def piece(leaf, index):  # index: int32[depth]
        for k in range(depth):
            leaf = jax.lax.dynamic_index_in_dim(leaf, index[k], 0, keepdims=False)
        return leaf

    return (
        jax.jit(piece, out_shardings=out)
        .lower(
            jax.ShapeDtypeStruct(shape, dtype, sharding=sharding),
            jax.ShapeDtypeStruct((depth,), jnp.int32, sharding=out),
        )
        .compile()
    )


def _fetch(leaf, index: tuple) -> np.ndarray:
    """leaf[index] as a float32 numpy array on this host (all processes must call it together)."""
    if not isinstance(leaf, jax.Array):
        return np.asarray(leaf[index], np.float32)
    run = _gather(leaf.shape, leaf.dtype, leaf.sharding, len(index))
    out = _replicated(leaf.sharding)
    idx = jax.make_array_from_callback((len(index),), out, lambda _: np.asarray(index, np.int32))
    piece = run(leaf, idx)
    value = np.array(piece.addressable_data(0), np.float32)  # a copy: the device buffers go now
    piece.delete()
    return value


def prepare_export(cfg, params: dict) -> int:
    """Compiles the gather programs the export of `params` needs (XLA's compile memory is a fixed
    cost per architecture and mesh); returns how many distinct ones."""
    for t in hf.hf_plan(cfg):
        for path in t.leaves:
            leaf = _get(params, path)
            if isinstance(leaf, jax.Array):
                _gather(leaf.shape, leaf.dtype, leaf.sharding, len(t.index))
    return _gather.cache_info().currsize


def _header(tensors: list) -> bytes:
    """safetensors header as the reference writer (safetensors 0.8) makes it: tensors sorted by
    name (all float32, so dtype order is moot), compact JSON, space-padded to 8 bytes."""
    meta, offset = {"__metadata__": {"format": "pt"}}, 0
    for t in tensors:
        nbytes = 4 * int(np.prod(t.shape, dtype=np.int64))
        meta[t.name] = {
            "dtype": "F32",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def save_hf_checkpoint_sharded(
    cfg, params: dict, path: str, max_shard_bytes: int = 4 << 30
) -> None:
    """Writes what hf.save_hf_checkpoint writes, from global (sharded, multi-process) params,
    one tensor at a time. Every process calls it with the same arguments; process 0 writes."""
    plan = list(hf.hf_plan(cfg))
    shards = hf.shard_files(plan, max_shard_bytes)
    names = hf.shard_file_names(len(shards))
    writer = jax.process_index() == 0
    if writer:
        os.makedirs(path, exist_ok=True)
    weight_map = {t.name: file for file, shard in zip(names, shards) for t in shard}  # plan order
    total = 0
    for file, shard in zip(names, shards):
        shard = sorted(shard, key=lambda t: t.name)  # the reference writer's data order
        final = os.path.join(path, file)  # written under a temporary name, renamed when whole:
        tmp = final + ".tmp"  # a killed export never leaves a truncated file under a real name
        with open(tmp, "wb") if writer else contextlib.nullcontext() as f:
            if writer:
                f.write(_header(shard))
            for t in shard:
                value = t.value([_fetch(_get(params, p), t.index) for p in t.leaves])
                if tuple(value.shape) != tuple(t.shape):
                    raise ValueError(
                        f"HF export: {t.name} has shape {value.shape}, planned {t.shape}"
                    )
                if writer:
                    f.write(np.ascontiguousarray(value, np.float32).data)
                total += value.nbytes
        if writer:
            os.replace(tmp, final)
    if writer:
        hf.write_index_and_config(cfg, path, weight_map, total, len(shards))
    if jax.process_count() > 1:  # no process returns before the files are complete
        multihost_utils.sync_global_devices("save_hf_checkpoint_sharded")
