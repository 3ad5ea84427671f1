"""The run's model config and sharding rules, from the run config: what the trainer
(train/trainer.py) and the RL samplers (rl/sampling/sampler_process.py) both need, without the
trainer's optimizer, state or checkpoint modules (a sampler process imports this, never
train.trainer).
"""

from __future__ import annotations

import dataclasses
import os

import jax

import model
from model import sharding as model_sharding
from model.config import resolve_compute_dtype
from train import sharding as shd


def apply_model_overrides(cfg, overrides: dict):
    """cfg with ModelConfig fields replaced; `rope_scaling` (a dict) is merged into the existing
    RopeScaling, so a stage can change only the YaRN factor. Unknown fields are errors."""
    fields = {f.name for f in dataclasses.fields(cfg)}
    for name in overrides:
        if name not in fields:
            raise ValueError(f"unknown ModelConfig field {name!r}")
    overrides = dict(overrides)
    rope = overrides.get("rope_scaling")
    if isinstance(rope, dict):
        known = {f.name for f in dataclasses.fields(cfg.rope_scaling)}
        for name in rope:
            if name not in known:
                raise ValueError(f"unknown rope_scaling field {name!r}")
        overrides["rope_scaling"] = dataclasses.replace(cfg.rope_scaling, **rope)
    return dataclasses.replace(cfg, **overrides)


def _base_model_config(config) -> tuple[model.ModelConfig, str | None]:
    """(ModelConfig, HF folder or None) before overrides: exported params' own config
    (config.init_params_from) wins, else an HF folder or a preset name (config.model)."""
    name, init = config.model, config.init_params_from
    if init and os.path.isfile(os.path.join(init, "model_config.json")):
        from model import export

        with open(os.path.join(init, "model_config.json")) as f:
            try:
                return export.config_from_json(f.read()), None
            except ValueError as e:
                raise shd.ConfigError(f"init_params_from={init!r}: {e}") from None
    if os.path.isdir(name):
        from model import hf

        try:
            return hf.read_config(name)[0], name
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise shd.ConfigError(f"model={name!r}: {' '.join(str(e).split())}") from None
    try:
        return model.presets.get(name), None
    except ValueError as e:
        raise shd.ConfigError(f"model={name!r}: {e}") from None


def model_config(config) -> tuple[model.ModelConfig, str | None]:
    """(ModelConfig, HF folder or None): exported params' config, an HF folder or a preset,
    with the run's compute dtype ('auto' resolved for this backend), remat, the engines'
    decode_dtype and `model_overrides`."""
    cfg, hf_dir = _base_model_config(config)
    cfg = dataclasses.replace(
        cfg,
        dtype=resolve_compute_dtype(config.train.compute_dtype, jax.default_backend()),
        remat=config.train.remat,
        decode_dtype=config.decode_dtype,
    )
    overrides = config.get("model_overrides")
    if overrides:
        overrides = overrides.to_dict() if hasattr(overrides, "to_dict") else dict(overrides)
        try:
            cfg = apply_model_overrides(cfg, overrides)
        except (TypeError, ValueError) as e:
            raise shd.ConfigError(f"model_overrides: {e}") from None
    return cfg, hf_dir


def model_rules(config) -> tuple:
    """The config's logical -> mesh rules, or the model's defaults when it names none."""
    if len(config.rules):
        return shd.rules_from_config(config.rules)
    return tuple(model_sharding.DEFAULT_RULES)
