"""--dry_run: sizes, FLOPs and per-device bytes under the configured mesh, from shapes alone.

Works for a mesh of devices we do not have (config.dry_run_devices, e.g. 256 for kimi_k2):
params and optimizer state are jax.eval_shape'd, shardings come from the logical rules on an
AbstractMesh, and bytes are counted from shapes and partition specs. Nothing is allocated.
"""

from __future__ import annotations

import functools

import jax

import model
from train import build
from train import sharding as shd
from train.config_check import check_config
from train.run import build_optimizer, model_config, model_rules


def report(config) -> str:
    cfg, _ = model_config(config)
    rules = model_rules(config)
    n_dev = config.dry_run_devices or jax.device_count()
    sizes = check_config(config, cfg, n_dev)
    mesh = shd.abstract_mesh(sizes, n_dev)
    tx, _ = build_optimizer(config, cfg)
    init_fn = functools.partial(model.params.init_params_unjitted, cfg)
    abstract = build.abstract_state(init_fn, tx)
    sh = build.state_shardings(init_fn, model.param_logical_specs(cfg), tx, mesh, rules)
    param_bytes = shd.bytes_per_device(abstract.params, sh.params, sizes)
    opt_bytes = shd.bytes_per_device(abstract.opt_state, sh.opt_state, sizes)
    total, active = model.count_params(cfg)
    flops = model.flops_per_token(cfg, config.train.seq_len)
    gib = 2.0**30
    return "\n".join(
        [
            f"model {config.model}: {total:,} params total, {active:,} active per token",
            f"training FLOPs/token (seq_len {config.train.seq_len}): {flops:.3e}",
            f"mesh {sizes} on {n_dev} devices",
            f"per device: params {param_bytes / gib:.2f} GiB + optimizer state {opt_bytes / gib:.2f} GiB"
            f" = {(param_bytes + opt_bytes) / gib:.2f} GiB",
        ]
    )
