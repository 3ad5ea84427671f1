"""Analytic communication and memory plans, from shapes and a mesh alone (nothing is allocated).

    moe_comm_bytes(cfg, sizes, global_tokens)   bytes each device sends per MoE layer per step
    hlo_collective_bytes(compiled_hlo_text)     the same quantity read off a compiled program
    memory_plan(cfg, sizes, seq_len, ...)       per-device params / grads / optimizer /
                                                activations / MoE buffers, and whether it fits
                                                a device's HBM
    dry_run_table(cfg)                          kimi_k2-style table over layouts and contexts

"Bytes sent" per collective, per device, for a group of g devices and a per-device buffer S
(ring/pairwise algorithms, which is what the counts below and XLA's collectives agree on):
  all-to-all S -> S·(g-1)/g (its own block stays);  all-gather to S_out -> S_out·(g-1)/g;
  reduce-scatter to S_out -> S_out·(g-1);  all-reduce S -> 2·S·(g-1)/g.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

from model import moe_a2a
from model import sharding as sh
from model.config import ModelConfig
from model.decode import cache_bytes_per_token
from model.kernels.attention import causal_blocks

# --- MoE all-to-all dispatch: analytic bytes -----------------------------------------------------


def _itemsize(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2}[dtype]


def moe_comm_bytes(
    cfg: ModelConfig,
    sizes: dict,
    global_tokens: int,
    rules=sh.DEFAULT_RULES,
    training: bool = True,
) -> dict[str, float]:
    """Bytes one device sends per MoE layer per step with cfg.moe_comm='alltoall', by collective.

    sizes: {mesh axis: size}; global_tokens: B·T of the step. Forward: dispatch all-to-all of the
    rows (dtype) and of their local expert ids (int32), the return all-to-all, FSDP all-gather of
    the three expert matrices, tensor psum of the combined output (float32), and the expert-axis
    all-gather of the output when the batch is replicated over the expert axes. Backward mirrors
    them: two all-to-alls of row gradients, reduce-scatter of weight grads over fsdp, all-reduce of
    weight grads over data, tensor all-reduce of dx and of the routing-weight grads, expert-axis
    all-gather of dx and of the routing-weight grads. With remat, the forward's collectives run
    again in the backward.
    """
    lay = moe_a2a.layout_from_rules(rules, sizes)
    ep, f, t = lay.size(lay.expert), lay.size(lay.embed), lay.size(lay.mlp)
    dp = lay.size(tuple(a for a in ("data",) if a in lay.batch))
    d, k, b = cfg.hidden_size, cfg.num_experts_per_tok, _itemsize(cfg.dtype)
    e_loc, f_loc = cfg.n_routed_experts // ep, cfg.moe_intermediate_size // t
    n_loc = -(-global_tokens // lay.size(lay.rows))  # rows per batch (x context) shard
    n = -(-n_loc // ep) if lay.split_tokens else n_loc  # rows each device dispatches
    rows = ep * moe_a2a.capacity(n * k, ep, cfg.moe_capacity_factor)  # R = ep·C
    a2a = lambda s: s * (ep - 1) / ep
    weights = 3 * e_loc * d * f_loc * b  # the three gathered expert matrices [E_loc, D, F_loc]
    fwd = {
        "all-to-all": a2a(rows * d * b) * 2 + a2a(rows * 4),
        "all-gather": weights * (f - 1) / f + (a2a(n * ep * d * b) if lay.split_tokens else 0),
        "all-reduce": 2 * (t - 1) / t * n * d * 4,
        "reduce-scatter": 0.0,
    }
    if not training:
        return fwd
    bwd = {
        "all-to-all": a2a(rows * d * b) * 2,
        "all-gather": a2a(n * ep * (d * b + k * 4)) if lay.split_tokens else 0,  # dx, d(weights)
        "all-reduce": 2 * (t - 1) / t * n * (d * b + k * 4) + 2 * (dp - 1) / dp * weights / f,
        "reduce-scatter": weights * (f - 1) / f,
    }
    again = 2 if cfg.remat != "none" else 1
    return {op: again * fwd[op] + bwd[op] for op in fwd}


# --- the same read off a compiled program ---------------------------------------------------------

_COLLECTIVE = re.compile(
    r"^\s*(?:ROOT )?%[\w.\-]+ = (.+?) "
    r"(all-to-all|all-gather|reduce-scatter|all-reduce|collective-permute)(?:-start)?\("
)
_ARRAY = re.compile(r"\b(pred|[sufb]f?\d+|f8e\w+)\[([\d,]*)\]")
_BYTES = {"pred": 1, "bf16": 2}


def _shape_bytes(shape_text: str) -> int:
    total = 0
    for dtype, dims in _ARRAY.findall(shape_text):
        size = _BYTES.get(dtype) or int(re.sub(r"\D", "", dtype) or 8) // 8
        total += size * math.prod(int(x) for x in dims.split(",") if x)
    return total


def _group_size(line: str, num_devices: int) -> int:
    m = re.search(r"replica_groups=\{\{([\d,]+)\}", line)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[([\d,]+)\]<=", line)  # iota form [groups, size]<=[...]
    if m:
        return int(m.group(1).split(",")[-1])
    m = re.search(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}", line)  # mesh[a=2,..] {a,..}
    if m:
        axis = dict(re.findall(r"'(\w+)'=(\d+)", m.group(1)))
        return math.prod(int(axis[a]) for a in re.findall(r"'(\w+)'", m.group(2)))
    return num_devices


def hlo_collective_bytes(hlo_text: str, num_devices: int) -> dict[str, float]:
    """Bytes each device sends, by collective kind, over a compiled (SPMD-partitioned) HLO module,
    whose shapes are per device. Async pairs are counted once (at -start)."""
    out = {"all-to-all": 0.0, "all-gather": 0.0, "reduce-scatter": 0.0, "all-reduce": 0.0}
    out["collective-permute"] = 0.0
    for line in hlo_text.splitlines():
        m = _COLLECTIVE.match(line)
        if not m:
            continue
        shape, op = m.group(1), m.group(2)
        if op.endswith("start") or "-start(" in line:
            shape = shape.split("),")[-1] if shape.startswith("((") else shape
        size, g = _shape_bytes(shape), _group_size(line, num_devices)
        if g <= 1:
            continue
        out[op] += {
            "all-to-all": size * (g - 1) / g,
            "all-gather": size * (g - 1) / g,
            "reduce-scatter": size * (g - 1),
            "all-reduce": 2 * size * (g - 1) / g,
            "collective-permute": size,
        }[op]
    return out


# --- per-device memory ----------------------------------------------------------------------------

GIB = 2.0**30
# name -> (devices, usable HBM bytes per device)
LAYOUTS = {
    "v5p-512 (256 chips x 95 GB)": (256, 95e9),
    "256 x H100-80GB": (256, 80e9),
    "256 x H200-141GB": (256, 141e9),
    "v5p-1024 (512 chips x 95 GB)": (512, 95e9),
    "512 x H100-80GB": (512, 80e9),
}
# The plan's measured error: the lowest and highest plan / XLA compiled bytes over
# bench/bench_memory_plan.py's grid (its GRID layouts, 512- and 2048-token rows, 2026-11-29;
# tests/test_memory_plan_grid.py; bench/RESULTS.md "Scale"). The low end sets the margins: a
# config keeps 10% of the chip free when total / MEASURED_PLAN_OVER_XLA[0] <= 0.9 x HBM. Low:
# data 4 x 4 microbatches, remat dots, gspmd dispatch, 2048-token rows; high: fsdp 2 x expert 2
# x tensor 2, remat none, 512-token rows (1.0996).
MEASURED_PLAN_OVER_XLA = (0.929, 1.100)
CANDIDATE_MESHES = (  # (data, fsdp, expert, tensor[, context]) over 256 or 512 devices
    (1, 16, 16, 1),
    (1, 32, 8, 1),
    (1, 8, 32, 1),
    (1, 8, 16, 2),
    (1, 4, 16, 4),
    (1, 4, 8, 8),
    (1, 2, 16, 8),
    (1, 1, 8, 8, 4),
    (1, 1, 4, 8, 8),
    (1, 1, 8, 8, 8),
    (1, 1, 4, 8, 16),
)


def _local_bytes(shape, spec, rules, sizes, itemsize=4) -> int:
    """Bytes of one device's shard of a param with logical `spec` (ceil: padding included)."""
    import flax.linen as nn

    mesh_axes = nn.logical_to_mesh_axes(tuple(spec), rules)
    n = 1
    for dim, axes in zip(shape, mesh_axes):
        axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
        n *= -(-dim // math.prod(sizes.get(a, 1) for a in axes))
    return n * itemsize


@functools.cache
def _shapes_and_specs(cfg: ModelConfig, group: str | None = None) -> list[tuple]:
    """(shape, logical spec) of every param, or of those under the params' top-level key
    `group` (e.g. 'moe_layers': the scanned stack of MoE layers)."""
    import jax

    from model.params import param_logical_specs, param_shapes

    is_spec = lambda x: isinstance(x, jax.sharding.PartitionSpec)
    shapes, specs = param_shapes(cfg), param_logical_specs(cfg)
    if group is not None:
        shapes, specs = shapes.get(group, {}), specs.get(group, {})
    return [
        (tuple(s.shape), tuple(p))
        for s, p in zip(jax.tree.leaves(shapes), jax.tree.leaves(specs, is_leaf=is_spec))
    ]


def param_bytes_per_device(
    cfg: ModelConfig, sizes: dict, rules=sh.DEFAULT_RULES, group: str | None = None
) -> int:
    """Float32 param bytes one device holds under `rules` on a mesh of `sizes` (of the params
    under top-level key `group` only, if given)."""
    return sum(_local_bytes(s, p, rules, sizes) for s, p in _shapes_and_specs(cfg, group))


TRAINED = ("all", "trunk", "mtp")


def gradient_bytes(
    cfg: ModelConfig, sizes: dict, rules=sh.DEFAULT_RULES, trained: str = "all"
) -> int:
    """Float32 gradient bytes one device's backward produces: of every param ('all'), of all but
    the MTP modules ('trunk': their loss is off, train.mtp_mode='none', so they never run and
    get no gradient: XLA holds no buffer for it) or of the MTP modules alone ('mtp':
    train.trainable='mtp', the trunk behind stop_gradient). The small preset's MTP module is
    31% of its params (bench/bench_memory_plan.py's grid); kimi_k2 has none."""
    if trained not in TRAINED:
        raise ValueError(f"trained must be one of {TRAINED} in a plan, got {trained!r}")
    if trained == "all":
        return param_bytes_per_device(cfg, sizes, rules)
    groups = {k for k in _param_groups(cfg) if k.startswith("mtp_") == (trained == "mtp")}
    return sum(param_bytes_per_device(cfg, sizes, rules, g) for g in groups)


@functools.cache
def _param_groups(cfg: ModelConfig) -> tuple[str, ...]:
    from model.params import param_shapes

    return tuple(param_shapes(cfg))


def accumulation_bytes(cfg: ModelConfig, sizes: dict, rules=sh.DEFAULT_RULES) -> int:
    """What gradient accumulation adds to the backward (microbatches > 1), per device.

    train/step.py sums the microbatches' gradients in a lax.scan. Read off XLA's compiled
    buffer assignments (the live-range dump's peak, bench/RESULTS_LOG.md issue 51), a
    microbatch's backward holds the scan's carry (the running sum: one float32 gradient) and the
    body's new sum (`acc + w * g`, not written into the carry: another), while the microbatch's
    own gradient is fused into that sum except the routed experts' of the scanned MoE layers:
    the transpose of the scan over layers concatenates them into a stacked [layers, E, ...]
    buffer first. So 2 gradients + the stacked experts' gradient where one microbatch holds 1
    gradient: this returns the difference (small preset, 3 layers: 1.44 gradients; kimi_k2:
    1.97). The carry holds every param's leaf, those without a gradient too (the MTP modules
    with their loss off: zeros carried), hence params, not gradient_bytes. The new sum and the
    stacked gradient exist only after the MoE layers' backward: memory_plan's 'accumulation'
    phase, not its 'backward'."""
    experts = sum(
        _local_bytes(shape, spec, rules, sizes)
        for shape, spec in _shapes_and_specs(cfg, "moe_layers")
        if sh.EXPERT in spec
    )
    return param_bytes_per_device(cfg, sizes, rules) + experts


def attention_score_bytes(seqs: int, h_loc: int, seq: int, cp: int, fused: bool) -> int:
    """One layer's attention intermediates per device beyond Q/K/V/out (float32): a fused kernel
    keeps only the log-sum-exp [H, t]; the blocked kernel (model/kernels/attention.py) scores
    [H, block, keys] with each query block against the keys up to its last row (cp = 1), or
    every local query against the whole row (cp > 1: the zig-zag chunks are not one prefix)."""
    t = seq // cp
    if fused:
        return seqs * h_loc * t * 4
    if cp > 1:
        return seqs * h_loc * t * seq * 4
    return seqs * h_loc * sum((hi - lo) * hi for lo, hi in causal_blocks(seq)) * 4


def _layer_activation_bytes(
    cfg: ModelConfig,
    lay,
    tokens: int,
    seq: int,
    moe: bool,
    fused_attention: bool = False,
    gspmd: bool = False,
) -> dict:
    """Bytes of one layer's forward intermediates on one device (what backward needs without
    remat), split into matmul outputs ('dots') and the rest. tokens: rows this device computes
    (seq_len / cp per sequence with a context axis of cp); keys are the whole row: with cp > 1
    the gathered latent + rope key (576 values/token for kimi_k2) and their per-head expansion
    are [seq] long on every context shard (model/context.py). gspmd: the MoE dispatch is
    moe_comm='gspmd' (see _gspmd_moe_bytes), else the all-to-all one (model/moe_a2a.py)."""
    b, d, h = _itemsize(cfg.dtype), cfg.hidden_size, cfg.num_attention_heads
    tp, cp = lay.size(lay.mlp), lay.size(lay.seq)
    h_loc = -(-h // tp)
    n, r, v, lat = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    q_rank = cfg.q_lora_rank or 0
    seqs = max(1, tokens * cp // seq)
    keys = seqs * seq if cp > 1 else tokens
    # query side, per local token: q_a, q (nope+rope), kv_a (latent+rope), attention out, wo out
    per_token_dots = (q_rank + h_loc * (n + r) + lat + r + h_loc * v + d) * b
    per_token_other = (2 * d + q_rank + lat + 2 * d) * b  # norms' outputs, residual adds
    key_dots = h_loc * (n + v) * b  # k_nope, v expanded per head from the latent, per key
    key_other = (h_loc * (n + r) + (lat + r if cp > 1 else 0)) * b  # keys with rope; gathered
    scores = attention_score_bytes(seqs, h_loc, seq, cp, fused_attention)
    out = {
        "dots": tokens * per_token_dots + keys * key_dots + scores,
        "other": tokens * per_token_other + keys * key_other + (0 if fused_attention else scores),
    }
    if not moe:
        f_loc = cfg.intermediate_size // tp
        out["dots"] += tokens * (3 * f_loc) * b
        out["other"] += tokens * f_loc * b
        out["moe_buffers"] = out["moe_saved"] = 0
        return out
    e, k, f_loc = cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size // tp
    if gspmd:
        out["moe_buffers"], out["moe_saved"] = _gspmd_moe_bytes(cfg, lay, tokens)
    else:
        ep = lay.size(lay.expert)
        n_disp = -(-tokens // ep) if lay.split_tokens else tokens
        rows = ep * moe_a2a.capacity(n_disp * k, ep, cfg.moe_capacity_factor)  # R = ep·C
        # send + recv + expert output + returned rows [R, D]; gate, up, h [R, F_loc]; combine
        # [a, D] f32
        out["moe_buffers"] = rows * (4 * d * b + 3 * f_loc * b) + n_disp * k * d * 4
        # What the backward keeps of them (remat 'none'): the received rows, gate/up/h, the
        # combine; the send and return buffers are transient.
        out["moe_saved"] = rows * (d * b + 3 * f_loc * b) + n_disp * k * d * 4
    fs_loc = cfg.moe_intermediate_size * cfg.n_shared_experts // tp
    out["dots"] += tokens * (e * 4 + 3 * fs_loc * b)  # router logits, shared expert
    out["other"] += tokens * (e * 4 + fs_loc * b)
    return out


def _gspmd_moe_bytes(cfg: ModelConfig, lay, tokens: int) -> tuple[int, int]:
    """(buffers, saved) of one MoE layer's moe_comm='gspmd' dispatch (model/moe.py
    dispatch_grouped) on one device. Its grouped matmul is a custom call GSPMD cannot partition,
    so every device runs it whole: on all A = N·k assignments of the step's global rows (this
    device's tokens x the batch and context shards: [A, D] rows gathered) against all experts'
    full-width weights. Buffers: the sorted rows, the kernel's output and the unsorted output
    [A, D] (compute dtype), gate/up/h [A, F] and the float32 combine [A, D]; the backward keeps
    the sorted rows, gate/up/h and the combine."""
    b, d, k, f = (
        _itemsize(cfg.dtype),
        cfg.hidden_size,
        cfg.num_experts_per_tok,
        cfg.moe_intermediate_size,
    )
    a = tokens * lay.size(lay.rows) * k
    return a * (3 * d * b + 3 * f * b + d * 4), a * (d * b + 3 * f * b + d * 4)


def layer_weight_count(cfg: ModelConfig, lay, moe: bool, gspmd: bool = False) -> int:
    """Params of one layer one device computes with (expert and tensor shards; the FSDP axes
    gathered): MLA, then the MoE's local experts, shared expert and router, or the dense MLP."""
    d, tp = cfg.hidden_size, lay.size(lay.mlp)
    h_loc = -(-cfg.num_attention_heads // tp)
    n, r, v, lat = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    q = cfg.q_lora_rank
    attn = (d * q + q * h_loc * (n + r)) if q else d * h_loc * (n + r)
    attn += d * (lat + r) + lat * h_loc * (n + v) + h_loc * v * d
    if not moe:
        return attn + 3 * d * (cfg.intermediate_size // tp)
    f_loc = cfg.moe_intermediate_size // tp
    shared = 3 * d * f_loc * cfg.n_shared_experts
    # The gspmd dispatch's kernel runs whole on every device: all experts at full width.
    e_loc = cfg.n_routed_experts if gspmd else cfg.n_routed_experts // lay.size(lay.expert)
    f_routed = cfg.moe_intermediate_size if gspmd else f_loc
    return attn + 3 * e_loc * d * f_routed + shared + d * cfg.n_routed_experts


def gathered_weight_bytes(cfg: ModelConfig, lay, moe: bool, gspmd: bool = False) -> int:
    """One layer's weights while it runs: a compute-dtype copy gathered over the FSDP axes (or
    just cast, without them) and, with FSDP (or the gspmd dispatch's whole expert weights), the
    layer's full float32 weight gradient before its reduce-scatter or slice (without either it
    accumulates in place: counted in 'grads')."""
    count = layer_weight_count(cfg, lay, moe, gspmd)
    gathered = lay.size(lay.embed) > 1 or (
        gspmd and moe and lay.size(lay.expert) * lay.size(lay.mlp) > 1
    )
    return count * (_itemsize(cfg.dtype) + (4 if gathered else 0))


def memory_plan(
    cfg: ModelConfig,
    sizes: dict,
    seq_len: int,
    seqs_per_shard: int = 1,
    rules=sh.DEFAULT_RULES,
    optimizer_moments: int = 2,
    moment_bytes: int = 4,
    fused_attention: bool = False,
    microbatches: int = 1,
    moe_comm: str = "alltoall",
    trained: str = "all",
) -> dict[str, float]:
    """Per-device bytes of one training step (train/step.py under train/trainer.py's jit, state
    donated): float32 params and `optimizer_moments` moments (moment_bytes each element), which
    live throughout, plus the largest of the step's phases, each a set of buffers live at once:

      backward   while a layer's backward runs: the gradient (float32, params' shards, of the
                 params the loss reaches: gradient_bytes) + with microbatches > 1 the
                 accumulation's carry (one gradient of every param) + activations saved under
                 cfg.remat + one layer's working set (its recomputed forward, their gradients,
                 its gathered weights and their gradient, its MoE dispatch buffers) + the
                 output logits and their gradient;
      accumulation (microbatches > 1) once the MoE layers' backward is done: the gradient +
                 accumulation_bytes (carry, new sum, stacked experts' gradient) + the dense
                 layers' saved activations + the activations of a dense and a MoE layer's
                 working sets (XLA frees the MoE layer's after the dense layer's backward) and
                 the dense layer's gathered weights + the logits. Counting the new sum in the
                 layers' backward ran 1.19x XLA's bytes at 512-token rows (issue 51);
      optimizer  the (averaged) gradient and optax's `updates` tree (float32, one more gradient)
                 before apply_updates: 2 gradients (XLA, 1 device, remat none: the trunk's
                 gradient + 1.3 params' worth of new values under the non-finite guard's cond);
      embedding  the embedding lookup's gradient: when the table's D axis is sharded over axes
                 that also split the tokens, GSPMD resolves the lookup by a full
                 rematerialization (its "Involuntary full rematerialization" warning): one
                 float32 [rows, T, D] copy of the tokens of every such shard, beside the
                 gradient and the accumulator.

    Each batch shard (data x fsdp) holds seqs_per_shard sequences of seq_len tokens per
    microbatch; expert and tensor replicas compute the same rows outside the MoE dispatch.
    moe_comm: 'alltoall' (model/moe_a2a.py) or 'gspmd' (the dispatch runs whole on every
    device). Checked against XLA's compiled memory on a grid of layouts in
    tests/test_memory_plan_grid.py (bench/bench_memory_plan.py prints it)."""
    if moe_comm not in ("alltoall", "gspmd"):
        raise ValueError(f"moe_comm must be 'alltoall' or 'gspmd' in a plan, got {moe_comm!r}")
    gspmd = moe_comm == "gspmd"
    lay = moe_a2a.layout_from_rules(rules, sizes)
    params = param_bytes_per_device(cfg, sizes, rules)
    grads = gradient_bytes(cfg, sizes, rules, trained)
    cp = lay.size(lay.seq)
    if seq_len % cp:
        raise ValueError(f"seq_len {seq_len} does not split over a context axis of {cp}")
    tokens = seqs_per_shard * seq_len // cp  # this device's tokens (its context shard's)
    dense = _layer_activation_bytes(cfg, lay, tokens, seq_len, False, fused_attention)
    moe = _layer_activation_bytes(cfg, lay, tokens, seq_len, True, fused_attention, gspmd)
    n_dense, n_moe = cfg.num_dense_layers, cfg.num_moe_layers
    layer_all = lambda a: a["dots"] + a["other"]
    boundary = tokens * cfg.hidden_size * _itemsize(cfg.dtype)  # each layer's input, always saved
    if cfg.remat == "none":
        saved_dense, saved_moe = layer_all(dense), layer_all(moe) + moe["moe_saved"]
    elif cfg.remat == "full":
        saved_dense = saved_moe = boundary
    else:  # 'dots' policies keep matmul outputs, recompute the rest
        saved_dense, saved_moe = dense["dots"] + boundary, moe["dots"] + boundary
    saved = n_dense * saved_dense + n_moe * saved_moe
    # One layer's recomputed forward and its gradients are live at once during its backward, with
    # its gathered weights and their gradient. What is recomputed: nothing without remat (the
    # forward's intermediates are in `saved`), the whole layer under 'full', under 'dots' all but
    # the matmul outputs (saved).
    recomputed = {"none": lambda a: 0, "full": layer_all, "dots": lambda a: a["other"]}[cfg.remat]
    copies = 1 if cfg.remat == "none" else 2  # the MoE dispatch's buffers: gradients (+ rerun)
    weights_dense = gathered_weight_bytes(cfg, lay, False) if n_dense else 0
    weights_moe = gathered_weight_bytes(cfg, lay, True, gspmd)
    acts_dense = layer_all(dense) + recomputed(dense) if n_dense else 0
    acts_moe = layer_all(moe) + recomputed(moe) + copies * moe["moe_buffers"]
    working = max(acts_dense + weights_dense, acts_moe + weights_moe)
    logits = 2 * tokens * -(-cfg.vocab_size // lay.size(lay.mlp)) * 4  # float32 logits + grads
    accumulator = accumulation_bytes(cfg, sizes, rules) if microbatches > 1 else 0
    # The embedding's full rematerialization: the token-splitting axes the table's D is sharded
    # over each hold a 1/size part of the rows' [T, D]; the lookup rebuilds all of it.
    remat_axes = [a for a in lay.rows if a in lay.embed]
    embed_rows = tokens * math.prod(lay.sizes[a] for a in remat_axes) if remat_axes else 0
    embedding = embed_rows * cfg.hidden_size * 4
    moments = optimizer_moments * params * moment_bytes // 4
    # The accumulation's new sum and the stacked experts' gradient exist only once the MoE
    # layers' backward is done (the scan's transpose concatenates the experts' gradients at its
    # end): while a layer's backward runs, the accumulation holds its carry alone (one float32
    # gradient of every param: the scan carries the whole tree). The new sum is a phase of its
    # own, beside the dense layers' saved activations and the dense layer's backward (its
    # weights and activations), with the last MoE layer's working activations still live (read
    # off XLA's 2k-row dump; their weights' gradients are in the sum by then).
    carry = params if microbatches > 1 else 0
    finishing = n_dense * saved_dense + acts_dense + acts_moe + weights_dense
    phases = {
        "backward": grads + carry + saved + working + logits,
        "accumulation": grads + accumulator + finishing + logits,
        "optimizer": 2 * params,
        "embedding": grads + accumulator + embedding,
    }
    if microbatches == 1:
        del phases["accumulation"]
    peak = max(phases, key=phases.get)
    out = {
        "params": params,
        "grads": grads,
        "grad_accumulator": accumulator,
        "accumulation_carry": carry,
        "optimizer": moments,
        "activations_saved": saved,
        "layer_working_set": working,
        "moe_buffers_per_layer": moe["moe_buffers"],
        "logits": logits,
        "embedding_transient": embedding,
        "peak_phase": peak,
        **{f"phase_{k}": v for k, v in phases.items()},
    }
    out["total"] = params + out["optimizer"] + phases[peak]
    return out


TABLE_HEADER = (
    "| layout | mesh (data,fsdp,expert,tensor,context) | seq | attention | remat | micro-batches "
    "| params | grads | accum. grad | Adam | act. saved | layer working (MoE buffers) | logits "
    "| total GiB | fits | MoE a2a GB sent/layer/step |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def planned_fused(cfg: ModelConfig, accelerator: bool = True) -> bool:
    """Whether the plan counts a fused (flash) attention kernel: cfg.attention_impl, with 'auto'
    meaning what it resolves to on the target (model/kernels/backend.py: blocked on CPU, tokamax
    on GPU/TPU; a described pod mesh is an accelerator)."""
    impl = cfg.attention_impl
    if impl == "auto":
        return accelerator
    return impl != "blocked"


def planned_comm(cfg: ModelConfig, devices: int, accelerator: bool = True) -> str:
    """The MoE dispatch the plan counts: cfg.moe_comm, with 'auto' meaning what
    model/kernels/choice.py moe_comm picks on the target ('alltoall' on a multi-device GPU/TPU
    mesh, else 'gspmd')."""
    if cfg.moe_comm != "auto":
        return cfg.moe_comm
    return "alltoall" if accelerator and devices > 1 else "gspmd"


def table_row(
    cfg: ModelConfig,
    name: str,
    mesh: tuple,
    seq: int,
    hbm: float | None,
    rules,
    seqs_per_shard=1,
    microbatches=1,
    moment_bytes=4,
    fused: bool | None = None,
    moe_comm: str | None = None,
) -> str:
    """One table row: the plan of `mesh` (data, fsdp, expert, tensor[, context]) at context `seq`
    with seqs_per_shard sequences per batch shard per microbatch, optimizer moments of
    `moment_bytes` per element, cfg's remat and attention (fused: planned_fused(cfg) unless
    given), and whether it fits in `hbm` bytes per device (None: unknown device memory, '?')."""
    mesh = tuple(mesh) + (1,) * (len(sh.MESH_AXES) - len(mesh))
    sizes = dict(zip(sh.MESH_AXES, mesh))
    fused = planned_fused(cfg) if fused is None else fused
    moe_comm = moe_comm or planned_comm(cfg, math.prod(mesh))
    p = memory_plan(
        cfg, sizes, seq, seqs_per_shard, rules, moment_bytes=moment_bytes, fused_attention=fused,
        microbatches=microbatches, moe_comm=moe_comm,
    )  # fmt: skip
    tokens = seq * seqs_per_shard * mesh[0] * mesh[1]  # one microbatch of the global batch
    comm = sum(moe_comm_bytes(cfg, sizes, tokens, rules).values()) if cfg.num_moe_layers else 0
    g = lambda k: f"{p[k] / GIB:.1f}"
    fits = "?" if hbm is None else "yes" if p["total"] <= hbm else "no"
    ctx = f"{seq // 1024}k" if seq % 1024 == 0 else str(seq)
    ctx += f" x {seqs_per_shard}" if seqs_per_shard != 1 else ""
    adam = g("optimizer") + (" (bf16)" if moment_bytes == 2 else "")
    return (
        f"| {name} | {mesh} | {ctx} | {'fused' if fused else 'blocked'} | {cfg.remat} | "
        f"{microbatches} | {g('params')} | {g('grads')} | {g('grad_accumulator')} | {adam} | "
        f"{g('activations_saved')} | {g('layer_working_set')} ({g('moe_buffers_per_layer')}) | "
        f"{g('logits')} | {g('total')} | {fits} | {comm / 1e9:.2f} |"
    )


def dry_run_table(
    cfg: ModelConfig,
    seq_lens=(8192, 32768),
    layouts=LAYOUTS,
    meshes=CANDIDATE_MESHES,
    rules=sh.DEFAULT_RULES,
    first_rows: tuple = (),
    moment_bytes: int = 4,
) -> str:
    """Markdown table: per-device GiB by component for each layout x mesh x context (one
    sequence per batch shard), whether it fits, with cfg's dtype, remat and attention as given.
    A mesh with a context axis only at contexts it divides into zig-zag chunks. first_rows
    (table_row strings, e.g. the configured run's own mesh) go on top."""
    rows = [TABLE_HEADER, *first_rows]
    for name, (devices, hbm) in layouts.items():
        for mesh in meshes:
            full = tuple(mesh) + (1,) * (len(sh.MESH_AXES) - len(mesh))
            if math.prod(full) != devices or cfg.n_routed_experts % full[2]:
                continue
            for seq in seq_lens:
                if seq % (2 * full[4]) == 0:
                    rows.append(table_row(cfg, name, full, seq, hbm, rules, 1, 1, moment_bytes))
    return "\n".join(rows)


# --- the sampler's mesh: weights, latent cache, MoE buffers; weight pushes ------------------------


def sampler_plan(
    cfg: ModelConfig,
    sizes: dict,
    episodes: int,
    context: int,
    rules=sh.DEFAULT_RULES,
    dtype: str = "bfloat16",
    prefill_tokens: int = 8192,
    cache_split: str = "none",
) -> dict[str, float]:
    """Per-device bytes of a sampler engine on a mesh of `sizes`: weights in the engine's `dtype`
    (its resolved decode_dtype; the float32 router and norm scales, < 0.1% of them, counted alike)
    under `rules`, the latent cache of `episodes` concurrent sequences of `context` tokens in
    `dtype` (model/decode.py `cache_bytes_per_token`), and one MoE layer's dispatch buffers for a
    decode step of every slot and for one prefill call of `prefill_tokens` (a turn's new tokens).

    The cache is split as the engine splits it (model/engine/split.py, the same `engine_rules`):
    slots over the batch axes (with `cache_split` 'slots', over expert too: data-parallel
    attention), positions over context with 'sequence'; with 'none' MLA's cache, which has no
    head axis, is whole on every device of a slot's row (kimi_k2 at 256k: 17.2 GiB a slot)."""
    from model.engine.split import engine_rules

    rules = engine_rules(rules, cache_split)
    lay = moe_a2a.layout_from_rules(rules, sizes)
    size = _itemsize(dtype)
    weights = sum(_local_bytes(s, p, rules, sizes, size) for s, p in _shapes_and_specs(cfg))
    slots = -(-episodes // _axes_size(sh.BATCH, rules, sizes))  # slots per device
    positions = -(-context // _axes_size(sh.CACHE_SEQ, rules, sizes))  # cache positions per device
    cache = slots * positions * cache_bytes_per_token(cfg, dtype)
    bf16 = dataclasses.replace(cfg, dtype="bfloat16")
    decode = _layer_activation_bytes(bf16, lay, slots, 1, True, fused_attention=True)
    prefill = _layer_activation_bytes(
        bf16, lay, prefill_tokens, prefill_tokens, True, fused_attention=True
    )
    out = {
        "weights": weights,
        "kv_cache": cache,
        "moe_buffers_decode": decode["moe_buffers"],
        "moe_buffers_prefill": prefill["moe_buffers"],
    }
    out["total"] = weights + cache + max(decode["moe_buffers"], prefill["moe_buffers"])
    return out


def _axes_size(logical: str, rules, sizes: dict) -> int:
    """How many shards the mesh axes that `rules` map `logical` to make (1 if unmapped)."""
    return math.prod(sizes.get(a, 1) for a in sh.mesh_axes_of(logical, rules))


def weight_push_bytes(cfg: ModelConfig, trainer_devices: int, devices_per_host: int) -> dict:
    """Bytes one trainer host writes per version to the weight store (rl/stores/weight_store.py:
    each
    distinct bfloat16 shard once, spread over the hosts): a full snapshot, and deltas at the
    issue's goals (2% and 5% of a snapshot per step)."""
    total = sum(math.prod(shape) for shape, _ in _shapes_and_specs(cfg))
    hosts = max(1, trainer_devices // devices_per_host)
    full = 2 * total / hosts
    return {"hosts": hosts, "full": full, "delta_2pct": 0.02 * full, "delta_5pct": 0.05 * full}
