"""Analytic communication and memory plans, from shapes and a mesh alone (nothing is allocated).

    moe_comm_bytes(cfg, sizes, global_tokens)   bytes each device sends per MoE layer per step
    hlo_collective_bytes(compiled_hlo_text)     the same quantity read off a compiled program
    memory_plan(cfg, sizes, seq_len, ...)       per-device params / grads / optimizer / activations /
                                                MoE buffers, and whether it fits a device's HBM
    dry_run_table(cfg)                          kimi_k2-style table over layouts and contexts

"Bytes sent" per collective, per device, for a group of g devices and a per-device buffer S
(ring/pairwise algorithms, which is what the counts below and XLA's collectives agree on):
  all-to-all S -> S·(g-1)/g (its own block stays);  all-gather to S_out -> S_out·(g-1)/g;
  reduce-scatter to S_out -> S_out·(g-1);  all-reduce S -> 2·S·(g-1)/g.
"""

from __future__ import annotations

import math
import re

from model import moe_a2a
from model import sharding as sh
from model.config import ModelConfig

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
    rows (dtype) and of their local expert ids (int32), the return all-to-all, FSDP all-gather of the
    three expert matrices, tensor psum of the combined output (float32), and the expert-axis
    all-gather of the output when the batch is replicated over the expert axes. Backward mirrors
    them: two all-to-alls of row gradients, reduce-scatter of weight grads over fsdp, all-reduce of
    weight grads over data, tensor all-reduce of dx and of the routing-weight grads, expert-axis
    all-gather of dx and of the routing-weight grads. With remat, the forward's collectives run again in the backward.
    """
    lay = moe_a2a.layout_from_rules(rules, sizes)
    ep, f, t = lay.size(lay.expert), lay.size(lay.embed), lay.size(lay.mlp)
    dp = lay.size(tuple(a for a in ("data",) if a in lay.batch))
    d, k, b = cfg.hidden_size, cfg.num_experts_per_tok, _itemsize(cfg.dtype)
    e_loc, f_loc = cfg.n_routed_experts // ep, cfg.moe_intermediate_size // t
    n_loc = -(-global_tokens // lay.size(lay.batch))  # rows per batch shard
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


# --- the same read off a compiled program ------------------------------------------------------------

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
