"""--mode=convert: export the params of the newest good checkpoint (params-only, for samplers and
the next stage's --config.init_params_from)."""
from __future__ import annotations

import os

import jax

from train import build, checkpoint, loop, sharding as shd


def export_latest(config, workdir: str, *, handle=None, rules=None) -> str:
  handle = handle or loop.model_handle(config)
  rules = rules if rules is not None else loop.model_rules(config, handle)
  mesh = shd.make_mesh(dict(config.mesh))
  tx, _ = loop.build_optimizer(config, handle)
  ckpt = checkpoint.Checkpointer(workdir, keep=config.checkpoint.keep, async_save=False)
  restored = ckpt.restore_latest(build.abstract_state(handle, tx),
                                 build.state_shardings(handle, tx, mesh, rules))
  if restored is None:
    raise FileNotFoundError(f'no checkpoint under {ckpt.directory}')
  state = restored[0]
  path = os.path.join(workdir, 'export', f'params_{int(jax.device_get(state.step))}')
  checkpoint.export_params(state.params, path)
  ckpt.close()
  return path
