"""The few model functions the training code needs, gathered in one handle.

The loop, steps and dry run take a `ModelHandle` instead of importing model/ directly, so tests
can pass a stand-in and so the seam with model/ (see MODEL_CONTRACT) lives in one place.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

Params = Any


@dataclasses.dataclass(frozen=True)
class ModelHandle:
  cfg: Any                                   # frozen model config dataclass
  init_params: Callable[[Any], Params]       # rng -> params (pure; jit it with out_shardings)
  apply: Callable[..., Any]                  # (params, tokens, positions=, segment_ids=) -> out
  trainable_mask: Callable[[Params], Any]    # params -> bool pytree (False: not trained)
  logical_specs: Callable[[], Any]           # () -> PartitionSpec pytree of logical names
  flops_per_token: Callable[[int], float]    # seq_len -> training FLOPs/token (fwd + bwd)
  count_params: Callable[[], tuple[int, int]]  # () -> (total, active)
  router_bias: Callable[[Params], Any] | None = None        # params -> [n_moe_layers, E]
  with_router_bias: Callable[[Params, Any], Params] | None = None


def from_model_package(cfg) -> ModelHandle:
  """Handle for model/ (the real Transformer); imported lazily so train/ imports without it."""
  import jax.numpy as jnp
  import model as model_pkg

  module = model_pkg.Transformer(cfg)

  def init_params(rng):
    tokens = jnp.zeros((1, 8), jnp.int32)
    return module.init(rng, tokens)['params']

  def apply(params, tokens, positions=None, segment_ids=None):
    return module.apply({'params': params}, tokens, positions=positions, segment_ids=segment_ids)

  def pick(name):
    """Contract functions may live on the module instance or the package."""
    return getattr(module, name, None) or getattr(model_pkg, name)

  has_moe = cfg.n_routed_experts > 0 and cfg.n_layers > cfg.first_k_dense_replace
  return ModelHandle(
      cfg=cfg,
      init_params=init_params,
      apply=apply,
      trainable_mask=pick('trainable_mask'),
      logical_specs=lambda: pick('param_logical_specs')(cfg),
      flops_per_token=lambda seq_len: pick('flops_per_token')(cfg, seq_len),
      count_params=lambda: model_pkg.count_params(cfg),
      router_bias=pick('router_bias') if has_moe else None,
      with_router_bias=pick('with_router_bias') if has_moe else None,
  )
