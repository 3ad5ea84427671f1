"""The few model functions the training code needs, gathered in one handle.

The loop, steps and dry run take a `ModelHandle` instead of importing model/ directly, so tests
can pass a stand-in and so the seam with model/ (see MODEL_CONTRACT) lives in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

Params = Any


@dataclasses.dataclass(frozen=True)
class ModelHandle:
    cfg: Any  # frozen model config dataclass
    init_params: Callable[[Any], Params]  # rng -> params (pure; jit it with out_shardings)
    apply: Callable[..., Any]  # (params, tokens, positions=, segment_ids=) -> out
    trainable_mask: Callable[[Params], Any]  # params -> bool pytree (False: not trained)
    logical_specs: Callable[[], Any]  # () -> PartitionSpec pytree of logical names
    flops_per_token: Callable[[int], float]  # seq_len -> training FLOPs/token (fwd + bwd)
    count_params: Callable[[], tuple[int, int]]  # () -> (total, active)
    # (params, expert counts {'main': [n_moe_layers, E], 'mtp': [M, E] (optional)}, rate) -> params;
    # None for models without MoE.
    update_router_bias: Callable[[Params, dict, float], Params] | None = None
    hf_params: Callable[[], Params] | None = (
        None  # numpy params of an HF checkpoint, if loaded from one
    )


def from_model_package(cfg, hf_dir: str | None = None) -> ModelHandle:
    """Handle for model/ (the real Transformer); imported lazily so train/ imports without it."""
    import model as m

    module = m.Transformer(cfg)

    def init_params(rng):
        return m.params.init_params_unjitted(
            cfg, rng
        )  # we jit it together with the optimizer state

    def apply(params, tokens, positions=None, segment_ids=None):
        return module.apply(
            {"params": params}, tokens, positions=positions, segment_ids=segment_ids
        )

    def update_router_bias(params, counts, rate):
        return m.update_router_bias(params, counts["main"], counts.get("mtp"), rate=rate)

    hf_params = None
    if hf_dir:
        hf_params = lambda: m.load_hf_checkpoint(hf_dir)[1]

    return ModelHandle(
        cfg=cfg,
        init_params=init_params,
        apply=apply,
        trainable_mask=m.trainable_mask,
        logical_specs=lambda: m.param_logical_specs(cfg),
        flops_per_token=lambda seq_len: m.flops_per_token(cfg, seq_len),
        count_params=lambda: m.count_params(cfg),
        update_router_bias=update_router_bias if cfg.num_moe_layers else None,
        hf_params=hf_params,
    )
