"""--mode=convert: export the params of the newest good checkpoint: params-only Orbax (for
samplers and the next stage's --config.init_params_from) with the tokenizer it was trained on
recorded in it (data/export_tokenizer.py), and, with --config.export_hf=True, an
HF folder (config.json + safetensors) through model/'s streamed HF export."""

from __future__ import annotations

import os

import jax

from data.export_tokenizer import record_tokenizer
from model import export
from model.errors import InputError
from train import checkpoint
from train.trainer import Run
from train.trainer import build as build_run


def export_latest(config, workdir: str, *, run: Run | None = None) -> str:
    run = run or build_run(config)
    with checkpoint.Checkpointer(workdir, keep=config.checkpoint.keep, async_save=False) as ckpt:
        if not ckpt.all_steps():
            raise InputError(f"--workdir={workdir}: no checkpoint under {ckpt.directory}")
        # None restoring, or one of another model: restore_latest's one-line errors
        state = ckpt.restore_latest(run.abstract_state(), run.state_shardings())[0]
    path = os.path.join(workdir, "export", f"params_{int(jax.device_get(state.step))}")
    export.save_params(path, run.cfg, state.params)
    record_tokenizer(path, config.data.tokenizer)  # the ids' meaning travels with the params
    if config.export_hf:
        from model import hf_stream

        hf_path = path + "_hf"
        # Streamed: one tensor at a time gathered to process 0 (every process takes part), so
        # the params never need to fit in one host's memory.
        hf_stream.save_hf_checkpoint_sharded(run.cfg, state.params, hf_path)
        return f"{path}\n{hf_path}"
    return path
