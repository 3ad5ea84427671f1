"""--dry_run: sizes, FLOPs and per-device bytes under the configured mesh, from shapes alone.

Works for a mesh of devices we do not have (config.dry_run_devices, e.g. 256 for kimi_k2):
params and optimizer state are jax.eval_shape'd, shardings come from the logical rules on an
AbstractMesh, and bytes are counted from shapes and partition specs. Nothing is allocated.
"""

from __future__ import annotations

import jax

from train import build, loop
from train import sharding as shd
from train.config_check import check_config


def report(config, *, handle=None, rules=None) -> str:
    handle = handle or loop.model_handle(config)
    rules = rules if rules is not None else loop.model_rules(config, handle)
    n_dev = config.dry_run_devices or jax.device_count()
    sizes = check_config(config, handle.cfg, n_dev)
    mesh = shd.abstract_mesh(sizes, n_dev)
    tx, _ = loop.build_optimizer(config, handle)
    abstract = build.abstract_state(handle, tx)
    sh = build.state_shardings(handle, tx, mesh, rules)
    param_bytes = shd.bytes_per_device(abstract.params, sh.params, sizes)
    opt_bytes = shd.bytes_per_device(abstract.opt_state, sh.opt_state, sizes)
    total, active = handle.count_params()
    flops = handle.flops_per_token(config.train.seq_len)
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
