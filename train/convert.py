"""--mode=convert: export the params of the newest good checkpoint: params-only Orbax (for
samplers and the next stage's --config.init_params_from) and, with --config.export_hf=True, an
HF folder (config.json + safetensors) through model/'s HF export."""

from __future__ import annotations

import os

import jax

from train import build, checkpoint, loop
from train import sharding as shd


def export_latest(config, workdir: str, *, handle=None, rules=None) -> str:
    handle = handle or loop.model_handle(config)
    rules = rules if rules is not None else loop.model_rules(config, handle)
    mesh = shd.make_mesh(dict(config.mesh))
    tx, _ = loop.build_optimizer(config, handle)
    with checkpoint.Checkpointer(workdir, keep=config.checkpoint.keep, async_save=False) as ckpt:
        restored = ckpt.restore_latest(
            build.abstract_state(handle, tx), build.state_shardings(handle, tx, mesh, rules)
        )
    if restored is None:
        raise FileNotFoundError(f"no checkpoint under {ckpt.directory}")
    state = restored[0]
    path = os.path.join(workdir, "export", f"params_{int(jax.device_get(state.step))}")
    checkpoint.export_params(state.params, path, handle.cfg)
    if config.get("export_hf"):
        from model import hf  # pylint: disable=import-outside-toplevel

        hf_path = path + "_hf"
        # Gathers every shard to this host: fine for what fits in host memory.
        hf.save_hf_checkpoint(handle.cfg, jax.device_get(state.params), hf_path)
        return f"{path}\n{hf_path}"
    return path
