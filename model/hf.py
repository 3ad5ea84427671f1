"""HuggingFace DeepSeek-V3 / Kimi-K2 checkpoints <-> (ModelConfig, params).

    cfg, params = load_hf_checkpoint("path/to/hf_dir")
    save_hf_checkpoint(cfg, params, "out_dir")          # inverse; load(save(x)) == x bitwise

Reads config.json in both styles (transformers-v5 `rope_parameters`; checkpoint-style `rope_theta` +
`rope_scaling`), safetensors as one file or shards with `model.safetensors.index.json`, tensor by
tensor (mmap, no whole-file copies), FP8 block-quantized weights (`weight_scale_inv`, 128x128
blocks, trailing partial blocks allowed) dequantized on load, and MTP modules stored at layer
index num_hidden_layers + m. Tensor layout notes: HF linears are [out, in]; ours are [in, out]
with heads split out; rope rows stay in the checkpoints' interleaved-pair order (see model/rope.py).
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
from typing import Any, NamedTuple

import numpy as np

from model.config import ModelConfig, RopeScaling
from model.errors import CheckpointError, CheckpointNotFound
from model.safetensors_io import SafetensorsFile

CONFIG_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    "n_routed_experts",
    "num_experts_per_tok",
    "n_shared_experts",
    "first_k_dense_replace",
)
OPTIONAL_FIELDS = (
    "n_group",
    "topk_group",
    "routed_scaling_factor",
    "norm_topk_prob",
    "rms_norm_eps",
    "max_position_embeddings",
    "tie_word_embeddings",
)


@contextlib.contextmanager
def _as_checkpoint_error():
    """safetensors_io's file errors (truncated, corrupt header, missing shard) as CheckpointError,
    so the entry point prints them in one line."""
    try:
        yield
    except CheckpointError:
        raise
    except (OSError, ValueError) as e:
        raise CheckpointError(" ".join(str(e).split())) from None


# --- config.json ------------------------------------------------------------------------------


def _rope_from_hf(raw: dict, where: str) -> tuple[float, RopeScaling]:
    params = raw.get("rope_parameters")
    if params is None:  # checkpoint style
        params = dict(raw.get("rope_scaling") or {})
        params.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))
    if rope_type in ("default", None):
        return theta, RopeScaling()
    if rope_type != "yarn":
        raise CheckpointError(
            f"{where}: rope type {rope_type!r} is not supported (expected 'default' or 'yarn')"
        )
    if params.get("attention_factor") is not None:
        raise CheckpointError(f"{where}: an explicit rope attention_factor is not supported")
    factor = params.get("factor")
    orig = params.get("original_max_position_embeddings")
    if orig is None:
        raise CheckpointError(f"{where}: yarn rope needs original_max_position_embeddings")
    if factor is None:
        if "max_position_embeddings" not in raw:
            raise CheckpointError(
                f"{where}: yarn rope without factor needs max_position_embeddings"
            )
        factor = raw["max_position_embeddings"] / orig
    return theta, RopeScaling(
        factor=float(factor),
        original_max_position_embeddings=int(orig),
        beta_fast=float(params.get("beta_fast") or 32),
        beta_slow=float(params.get("beta_slow") or 1),
        mscale=float(params.get("mscale") or 0.0),
        mscale_all_dim=float(params.get("mscale_all_dim") or 0.0),
        truncate=bool(params.get("truncate", True)),
    )


def _check_supported(raw: dict, where: str) -> None:
    def require(key, ok, default):
        value = raw.get(key, default)
        if not ok(value):
            raise CheckpointError(f"{where}: unsupported {key}={value!r}")

    require("hidden_act", lambda v: v == "silu", "silu")
    require("attention_bias", lambda v: not v, False)
    require("num_key_value_heads", lambda v: v in (None, raw.get("num_attention_heads")), None)
    require("scoring_func", lambda v: v == "sigmoid", "sigmoid")
    require(
        "topk_method", lambda v: v in ("noaux_tc", "greedy", "group_limited_greedy"), "noaux_tc"
    )
    require("moe_layer_freq", lambda v: v == 1, 1)


def config_from_hf(raw: dict, where: str = "config.json") -> tuple[ModelConfig, dict]:
    """-> (ModelConfig, extras {'rope_interleave', 'fp8_block'}) from a parsed config.json."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: expected a JSON object")
    missing = [k for k in CONFIG_FIELDS if k not in raw]
    if missing:
        raise CheckpointError(f"{where}: missing field(s) {', '.join(missing)}")
    _check_supported(raw, where)
    fields = {k: raw[k] for k in CONFIG_FIELDS}
    fields.update({k: raw[k] for k in OPTIONAL_FIELDS if raw.get(k) is not None})
    fields["rope_theta"], fields["rope_scaling"] = _rope_from_hf(raw, where)
    fields["num_mtp_modules"] = int(
        raw.get("num_nextn_predict_layers", raw.get("num_mtp_layers", 0)) or 0
    )
    quant = raw.get("quantization_config") or {}
    if quant and quant.get("quant_method") != "fp8":
        raise CheckpointError(
            f"{where}: quantization {quant.get('quant_method')!r} is not supported (only fp8)"
        )
    extras = {
        "rope_interleave": bool(raw.get("rope_interleave", True)),
        "fp8_block": tuple(quant.get("weight_block_size", (128, 128))) if quant else None,
    }
    try:
        return ModelConfig(**fields), extras
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: {e}") from None


def config_to_hf(cfg: ModelConfig) -> dict:
    raw = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
    raw.update({k: getattr(cfg, k) for k in CONFIG_FIELDS + OPTIONAL_FIELDS})
    raw.update(
        num_key_value_heads=cfg.num_attention_heads,
        num_nextn_predict_layers=cfg.num_mtp_modules,
        hidden_act="silu",
        attention_bias=False,
        rope_interleave=True,
        torch_dtype="float32",
    )
    s = cfg.rope_scaling
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if s.factor > 1.0:
        rope = {
            "rope_type": "yarn",
            "rope_theta": cfg.rope_theta,
            "factor": s.factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
            "beta_fast": s.beta_fast,
            "beta_slow": s.beta_slow,
            "mscale": s.mscale,
            "mscale_all_dim": s.mscale_all_dim,
            "truncate": s.truncate,
        }
    raw["rope_parameters"] = rope
    return raw


def read_config(path: str) -> tuple[ModelConfig, dict]:
    where = os.path.join(path, "config.json")
    try:
        with open(where) as f:
            raw = json.load(f)
    except FileNotFoundError:
        raise CheckpointNotFound(
            f"{where}: not found (is {path} an HF checkpoint folder?)"
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"{where}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    return config_from_hf(raw, where)


# --- tensors ------------------------------------------------------------------------------------


class TensorSource:
    """Name -> float32 array across one or many safetensors files, dequantizing FP8 on the fly."""

    def __init__(self, path: str, fp8_block, stream: bool = False):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            try:
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"{index}: not a safetensors index ({e!r})") from None
            files = {name: os.path.join(path, file) for name, file in weight_map.items()}
        else:
            files = {}
            for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
                with _as_checkpoint_error():
                    files.update({name: file for name in SafetensorsFile(file).keys()})
        if not files:
            raise CheckpointNotFound(f"{path}: no *.safetensors files found")
        self.path, self._files, self._open, self._fp8_block = path, files, {}, fp8_block
        self._stream = stream  # pread copies instead of memory-map views
        self.used: set[str] = set()

    def __contains__(self, name):
        return name in self._files

    def claim(self, name: str) -> None:
        """Marks a tensor as mapped without reading it (another host loads it)."""
        if name not in self._files:
            raise CheckpointError(f"{self.path}: checkpoint is missing tensor {name}")
        self.used.update(n for n in (name, name + "_scale_inv") if n in self._files)

    def report_unused(self) -> list[str]:
        """Checkpoint tensors nothing mapped (e.g. a newer architecture's extras): logged in one
        line with a count and the first few names, and returned."""
        unused = sorted(set(self._files) - self.used)
        if unused:
            shown = ", ".join(unused[:3]) + (", ..." if len(unused) > 3 else "")
            logging.warning(
                "%s: %d checkpoint tensor(s) not used: %s", self.path, len(unused), shown
            )
        return unused

    def _raw(self, name: str) -> np.ndarray:
        if name not in self._files:
            raise CheckpointError(f"{self.path}: checkpoint is missing tensor {name}")
        file = self._files[name]
        with _as_checkpoint_error():  # a truncated/corrupt file, a missing shard
            if file not in self._open:
                self._open[file] = SafetensorsFile(file)
            self.used.add(name)
            f = self._open[file]
            return f.read(name) if self._stream else f.get(name)

    def get(self, name: str, shape: tuple) -> np.ndarray:
        w = self._raw(name)
        if name + "_scale_inv" in self._files:
            w = dequantize_fp8(
                w, self._raw(name + "_scale_inv"), self._fp8_block or (128, 128), name
            )
        if tuple(w.shape) != tuple(shape):
            raise CheckpointError(
                f"{self.path}: tensor {name} has shape {tuple(w.shape)}, config.json implies "
                f"{tuple(shape)}"
            )
        return w.astype(np.float32)


def dequantize_fp8(w: np.ndarray, scale_inv: np.ndarray, block: tuple, name: str) -> np.ndarray:
    """W[i, j] = float(Wq[i, j]) * scale_inv[i // bi, j // bj] (trailing partial blocks allowed)."""
    bi, bj = block
    rows, cols = w.shape
    want = (-(-rows // bi), -(-cols // bj))
    if scale_inv.shape != want:
        raise ValueError(
            f"tensor {name}_scale_inv has shape {scale_inv.shape}, expected {want} for {w.shape} "
            f"in {bi}x{bj} blocks"
        )
    scale = np.repeat(np.repeat(scale_inv.astype(np.float32), bi, 0), bj, 1)[:rows, :cols]
    return w.astype(np.float32) * scale


# --- per-layer name mapping ---------------------------------------------------------------------
# Each entry: (our path inside a layer, HF name suffix, HF shape, to_ours, to_hf).


def _t(x):
    return x.T


def layer_entries(cfg: ModelConfig, moe: bool) -> list[tuple]:
    d, h, n, r, v = (
        cfg.hidden_size,
        cfg.num_attention_heads,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
    )
    l, k = cfg.kv_lora_rank, n + r
    heads_in = lambda inner, per_head: (
        lambda x: x.T.reshape(inner, h, per_head),
        lambda x: x.reshape(inner, h * per_head).T,
    )
    e = [
        (("attn_norm", "scale"), "input_layernorm.weight", (d,), None, None),
        (("mlp_norm", "scale"), "post_attention_layernorm.weight", (d,), None, None),
        (("attn", "wkv_a"), "self_attn.kv_a_proj_with_mqa.weight", (l + r, d), _t, _t),
        (("attn", "kv_a_norm", "scale"), "self_attn.kv_a_layernorm.weight", (l,), None, None),
        (
            ("attn", "wo"),
            "self_attn.o_proj.weight",
            (d, h * v),
            lambda x: x.T.reshape(h, v, d),
            lambda x: x.reshape(h * v, d).T,
        ),
    ]
    if cfg.q_lora_rank is None:
        e.append((("attn", "wq"), "self_attn.q_proj.weight", (h * k, d), *heads_in(d, k)))
    else:
        q = cfg.q_lora_rank
        e += [
            (("attn", "wq_a"), "self_attn.q_a_proj.weight", (q, d), _t, _t),
            (("attn", "q_a_norm", "scale"), "self_attn.q_a_layernorm.weight", (q,), None, None),
            (("attn", "wq_b"), "self_attn.q_b_proj.weight", (h * k, q), *heads_in(q, k)),
        ]
    # kv_b_proj [H*(n+v), L] holds both per-head up-projections; we keep W_UK and W_UV apart.
    e.append(
        (
            ("attn", ("wk_b", "wv_b")),
            "self_attn.kv_b_proj.weight",
            (h * (n + v), l),
            lambda x: tuple(np.split(x.T.reshape(l, h, n + v), [n], axis=-1)),
            lambda pair: np.concatenate(pair, axis=-1).reshape(l, h * (n + v)).T,
        )
    )
    if not moe:
        f = cfg.intermediate_size
        return e + [
            (("mlp", "gate"), "mlp.gate_proj.weight", (f, d), _t, _t),
            (("mlp", "up"), "mlp.up_proj.weight", (f, d), _t, _t),
            (("mlp", "down"), "mlp.down_proj.weight", (d, f), _t, _t),
        ]
    f, fs, ne = (
        cfg.moe_intermediate_size,
        cfg.moe_intermediate_size * cfg.n_shared_experts,
        cfg.n_routed_experts,
    )
    e += [
        (("moe", "router"), "mlp.gate.weight", (ne, d), _t, _t),
        (("moe", "router_bias"), "mlp.gate.e_score_correction_bias", (ne,), None, None),
    ]
    for ours, theirs, shape in (
        ("wi_gate", "gate_proj", (f, d)),
        ("wi_up", "up_proj", (f, d)),
        ("wo", "down_proj", (d, f)),
    ):
        e.append(
            (
                ("moe", ours),
                [f"mlp.experts.{j}.{theirs}.weight" for j in range(ne)],
                shape,
                lambda xs: np.stack([x.T for x in xs]),
                lambda x: [w.T for w in x],
            )
        )
    if cfg.n_shared_experts:
        e += [
            (("moe", "shared", "gate"), "mlp.shared_experts.gate_proj.weight", (fs, d), _t, _t),
            (("moe", "shared", "up"), "mlp.shared_experts.up_proj.weight", (fs, d), _t, _t),
            (("moe", "shared", "down"), "mlp.shared_experts.down_proj.weight", (d, fs), _t, _t),
        ]
    return e


def rope_rows_to_interleaved(cfg: ModelConfig, name: str, x: np.ndarray) -> np.ndarray:
    """Checkpoints with rope_interleave=False store rope dims as halves; convert rows to pairs."""
    n, r, l = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.kv_lora_rank
    to_pairs = np.stack([np.arange(r // 2), np.arange(r // 2) + r // 2], -1).reshape(
        -1
    )  # [0, r/2, 1, r/2+1, ...]
    if name.endswith(("q_proj.weight", "q_b_proj.weight")):
        rows = x.reshape(cfg.num_attention_heads, n + r, -1)
        return np.concatenate([rows[:, :n], rows[:, n:][:, to_pairs]], 1).reshape(x.shape)
    if name.endswith("kv_a_proj_with_mqa.weight"):
        return np.concatenate([x[:l], x[l:][to_pairs]], 0)
    return x


def layer_prefix(i: int) -> str:
    return f"model.layers.{i}."


def _read_layer(cfg, src, i: int, moe: bool, interleaved: bool) -> dict:
    out: dict = {}
    for path, hf_name, shape, to_ours, _ in layer_entries(cfg, moe):
        prefix = layer_prefix(i)
        if isinstance(hf_name, list):
            value = to_ours([src.get(prefix + name, shape) for name in hf_name])
        else:
            value = src.get(prefix + hf_name, shape)
            if not interleaved:
                value = rope_rows_to_interleaved(cfg, hf_name, value)
            value = to_ours(value) if to_ours else value
        _set(out, path, value)
    return out


def _set(tree: dict, path: tuple, value) -> None:
    *parents, leaf = path
    for p in parents:
        tree = tree.setdefault(p, {})
    if isinstance(leaf, tuple):
        for name, part in zip(leaf, value):
            tree[name] = part
    else:
        tree[leaf] = value


def _get(tree: dict, path: tuple):
    *parents, leaf = path
    for p in parents:
        tree = tree[p]
    return tuple(tree[name] for name in leaf) if isinstance(leaf, tuple) else tree[leaf]


def _stack_layers(layers: list[dict]) -> dict:
    import jax

    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *layers)


def load_hf_checkpoint(path: str, **config_overrides: Any) -> tuple[ModelConfig, dict]:
    """-> (cfg, params) with float32 numpy params in this model's tree. Runtime knobs (dtype,
    remat, moe_impl, ...) can be set through config_overrides."""
    cfg, extras = read_config(path)
    if config_overrides:
        cfg = cfg.replace(**config_overrides)
    src = TensorSource(path, extras["fp8_block"])
    interleaved = extras["rope_interleave"]
    d, vocab = cfg.hidden_size, cfg.vocab_size
    params: dict = {
        "embed": src.get("model.embed_tokens.weight", (vocab, d)),
        "final_norm": {"scale": src.get("model.norm.weight", (d,))},
    }
    if not cfg.tie_word_embeddings:
        params["lm_head"] = src.get("lm_head.weight", (vocab, d)).T
    dense = [_read_layer(cfg, src, i, False, interleaved) for i in range(cfg.num_dense_layers)]
    moe = [
        _read_layer(cfg, src, i, True, interleaved)
        for i in range(cfg.num_dense_layers, cfg.num_hidden_layers)
    ]
    if dense:
        params["dense_layers"] = _stack_layers(dense)
    if moe:
        params["moe_layers"] = _stack_layers(moe)
    for m in range(cfg.num_mtp_modules):
        params[f"mtp_{m}"] = _read_mtp(cfg, src, m, interleaved)
    src.report_unused()
    return cfg, params


def _read_mtp(cfg, src, m: int, interleaved: bool) -> dict:
    i, d = cfg.num_hidden_layers + m, cfg.hidden_size
    p = layer_prefix(i)
    for shared in ("embed_tokens.weight", "shared_head.head.weight"):  # copies of the main
        if p + shared in src:  # model's embedding and head, which the MTP modules share here
            src.claim(p + shared)
    return {
        "enorm": {"scale": src.get(p + "enorm.weight", (d,))},
        "hnorm": {"scale": src.get(p + "hnorm.weight", (d,))},
        "eh_proj": src.get(p + "eh_proj.weight", (d, 2 * d)).T,
        "head_norm": {"scale": src.get(p + "shared_head.norm.weight", (d,))},
        "block": _read_layer(cfg, src, i, cfg.mtp_is_moe, interleaved),
    }


# --- save --------------------------------------------------------------------------------------


class HFTensor(NamedTuple):
    """One checkpoint tensor, planned from the config alone: its HF name and shape, the leaves of
    our params tree it is built from (paths), the leading indices into each leaf (layer row,
    expert; () for the whole leaf) and the conversion of those pieces to the HF layout. The
    whole-model and the streamed exporters both write from this plan (one name/layout mapping)."""

    name: str
    shape: tuple
    leaves: tuple
    index: tuple
    to_hf: Any  # pieces (one per leaf) -> HF array; None: the single piece as is

    def value(self, pieces: list) -> np.ndarray:
        if self.to_hf is None:
            return pieces[0]
        return self.to_hf(pieces[0] if len(pieces) == 1 else tuple(pieces))


def leaf_paths(path: tuple) -> list[tuple]:
    """An entry's path -> the leaf paths it fills (('attn', ('wk_b', 'wv_b')) fills two)."""
    *parents, leaf = path
    leaves = leaf if isinstance(leaf, tuple) else (leaf,)
    return [tuple(parents) + (name,) for name in leaves]


def _one_expert(to_hf):
    """A routed-expert entry's to_hf maps [E, ...] -> E tensors; applied to one expert's piece."""
    return lambda piece: to_hf(piece[None])[0]


def _layer_plan(cfg, stack: tuple, index: tuple, i: int, moe: bool):
    prefix = layer_prefix(i)
    for path, hf_name, shape, _, to_hf in layer_entries(cfg, moe):
        leaves = tuple(stack + p for p in leaf_paths(path))
        if isinstance(hf_name, list):  # routed experts: one tensor per expert
            for e, name in enumerate(hf_name):
                yield HFTensor(prefix + name, shape, leaves, index + (e,), _one_expert(to_hf))
        else:
            yield HFTensor(prefix + hf_name, shape, leaves, index, to_hf)


def hf_plan(cfg: ModelConfig):
    """Yields an HFTensor per checkpoint tensor, in checkpoint order."""
    d, vocab = cfg.hidden_size, cfg.vocab_size
    head = (("embed",), None) if cfg.tie_word_embeddings else (("lm_head",), _t)
    yield HFTensor("model.embed_tokens.weight", (vocab, d), (("embed",),), (), None)
    for i in range(cfg.num_hidden_layers):
        stack, j, moe = (
            ("dense_layers", i, False)
            if i < cfg.num_dense_layers
            else ("moe_layers", i - cfg.num_dense_layers, True)
        )
        yield from _layer_plan(cfg, (stack,), (j,), i, moe)
    yield HFTensor("model.norm.weight", (d,), (("final_norm", "scale"),), (), None)
    if not cfg.tie_word_embeddings:
        yield HFTensor("lm_head.weight", (vocab, d), (head[0],), (), head[1])
    for m in range(cfg.num_mtp_modules):
        i, mtp = cfg.num_hidden_layers + m, f"mtp_{m}"
        p = layer_prefix(i)
        yield from _layer_plan(cfg, (mtp, "block"), (), i, cfg.mtp_is_moe)
        yield HFTensor(p + "enorm.weight", (d,), ((mtp, "enorm", "scale"),), (), None)
        yield HFTensor(p + "hnorm.weight", (d,), ((mtp, "hnorm", "scale"),), (), None)
        yield HFTensor(p + "eh_proj.weight", (d, 2 * d), ((mtp, "eh_proj"),), (), _t)
        yield HFTensor(
            p + "shared_head.norm.weight", (d,), ((mtp, "head_norm", "scale"),), (), None
        )
        yield HFTensor(p + "shared_head.head.weight", (vocab, d), (head[0],), (), head[1])
        yield HFTensor(p + "embed_tokens.weight", (vocab, d), (("embed",),), (), None)


def _leaf(tree: dict, path: tuple):
    for p in path:
        tree = tree[p]
    return tree


def _hf_tensors(cfg: ModelConfig, params: dict):
    """Yields (name, float32 array) in checkpoint order."""
    import jax

    params = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float32), params)
    for t in hf_plan(cfg):
        yield t.name, t.value([_leaf(params, p)[t.index] for p in t.leaves])


def shard_files(plan: list, max_shard_bytes: int) -> list[list]:
    """Greedy split of the (float32) tensors, in order, into files of at most max_shard_bytes
    (a tensor larger than that gets a file of its own)."""
    shards, current, size = [], [], 0
    for t in plan:
        nbytes = 4 * int(np.prod(t.shape, dtype=np.int64))
        if current and size + nbytes > max_shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += nbytes
    shards.append(current)
    return shards


def shard_file_names(count: int) -> list[str]:
    if count == 1:
        return ["model.safetensors"]
    return [f"model-{k + 1:05d}-of-{count:05d}.safetensors" for k in range(count)]


def save_hf_checkpoint(
    cfg: ModelConfig, params: dict, path: str, max_shard_bytes: int = 4 << 30
) -> None:
    """Writes config.json + float32 safetensors shards (+ index when more than one)."""
    from safetensors.numpy import save_file

    os.makedirs(path, exist_ok=True)
    shards, current, size = [], {}, 0
    for name, value in _hf_tensors(cfg, params):
        value = np.ascontiguousarray(value)
        if current and size + value.nbytes > max_shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name], size = value, size + value.nbytes
    shards.append(current)
    names = shard_file_names(len(shards))
    weight_map = {}
    for file, shard in zip(names, shards):
        save_file(shard, os.path.join(path, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in shard})
    total = sum(v.nbytes for s in shards for v in s.values())
    write_index_and_config(cfg, path, weight_map, total, len(shards))


def write_index_and_config(cfg, path: str, weight_map: dict, total: int, files: int) -> None:
    """config.json, and model.safetensors.index.json when the tensors span several files."""
    if files > 1:
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config_to_hf(cfg), f, indent=2)
