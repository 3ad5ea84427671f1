"""The run builder: one config -> every piece a training run is wired from (`build`).

    run = build(config)          # model config, rules, mesh, optimizer, losses, router-bias rule
    state, state_sh = restore_or_init(run, ckpt, train_it)

Nothing here touches data or devices beyond the mesh; the loop (train/loop.py), --mode=convert
and benches take a `Run`. Bad config values raise ConfigError with one line naming the field.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import jax
import optax
from jax.sharding import Mesh

import model
from model import sharding as model_sharding
from train import build as build_lib
from train import checkpoint, optim
from train import sharding as shd
from train.config_check import check_config
from train.losses import make_lm_loss
from train.state import TrainState
from train.step import BiasUpdate, router_bias_update


@dataclasses.dataclass(frozen=True)
class Run:
    config: Any  # the ml_collections run config
    cfg: model.ModelConfig
    hf_dir: str | None  # config.model was an HF folder: initial params come from it
    rules: tuple
    mesh_sizes: dict
    mesh: Mesh
    tx: optax.GradientTransformation
    schedule: optax.Schedule
    loss_fn: Callable  # (params, batch, rng) -> (loss, aux), for train_step
    eval_loss_fn: Callable  # the same without MTP heads (held-out CE only)
    bias_update: BiasUpdate | None

    def init_fn(self, rng):
        return model.params.init_params_unjitted(self.cfg, rng)

    def logical_specs(self):
        return model.param_logical_specs(self.cfg)

    def abstract_state(self) -> TrainState:
        return build_lib.abstract_state(self.init_fn, self.tx)

    def state_shardings(self) -> TrainState:
        return build_lib.state_shardings(
            self.init_fn, self.logical_specs(), self.tx, self.mesh, self.rules
        )


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


def model_config(config) -> tuple[model.ModelConfig, str | None]:
    """(ModelConfig, HF folder or None): `config.model` is a preset name or an HF folder."""
    name = config.model
    if os.path.isdir(name):
        from model import hf  # pylint: disable=import-outside-toplevel

        try:
            cfg, hf_dir = hf.read_config(name)[0], name
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise shd.ConfigError(f"model={name!r}: {' '.join(str(e).split())}") from None
    else:
        try:
            cfg, hf_dir = model.presets.get(name), None
        except ValueError as e:
            raise shd.ConfigError(f"model={name!r}: {e}") from None
    cfg = dataclasses.replace(cfg, dtype=config.train.compute_dtype, remat=config.train.remat)
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


def build_optimizer(config, cfg) -> tuple[optax.GradientTransformation, optax.Schedule]:
    t = config.train
    schedule = optim.make_schedule(
        kind=t.schedule,
        peak_lr=t.lr,
        total_steps=t.steps,
        warmup_steps=t.warmup_steps,
        min_lr_ratio=t.min_lr_ratio,
        decay_fraction=t.wsd_decay_fraction,
    )
    tx = optim.make_optimizer(
        params=model.param_shapes(cfg),
        logical_specs=model.param_logical_specs(cfg),
        schedule=schedule,
        optimizer=t.optimizer,
        weight_decay=t.weight_decay,
        b1=t.b1,
        b2=t.b2,
        eps=t.eps,
        clip_norm=t.clip_norm,
    )
    return tx, schedule


def build(config) -> Run:
    t = config.train
    cfg, hf_dir = model_config(config)
    mesh_sizes = check_config(config, cfg, jax.device_count(), jax.process_count())
    _check_init_params_from(config.init_params_from)  # before anything is compiled
    tx, schedule = build_optimizer(config, cfg)
    loss_kw = dict(z_loss_coef=t.z_loss, use_balance_loss=t.balance_loss)
    bias_on = cfg.num_moe_layers and t.bias_update_rate
    return Run(
        config=config,
        cfg=cfg,
        hf_dir=hf_dir,
        rules=model_rules(config),
        mesh_sizes=mesh_sizes,
        mesh=shd.make_mesh(mesh_sizes),
        tx=tx,
        schedule=schedule,
        loss_fn=make_lm_loss(cfg, mtp_mode=t.mtp_mode, mtp_weight=t.mtp_weight, **loss_kw),
        eval_loss_fn=make_lm_loss(cfg, mtp_mode="none", **loss_kw),
        bias_update=router_bias_update(t.bias_update_rate) if bias_on else None,
    )


def _check_init_params_from(path: str) -> None:
    if path and not os.path.isdir(os.path.join(path, "params")):
        raise shd.ConfigError(
            f"init_params_from={path!r}: not a params export (no {os.path.join(path, 'params')}; "
            "write one with --mode=convert)"
        )


def _load_init_params(path: str, abstract_params, model_name: str):
    """Exported params (--config.init_params_from), placed on the state's shardings."""
    _check_init_params_from(path)
    try:
        return checkpoint.load_params(path, abstract_params)
    except (ValueError, KeyError, TypeError, OSError) as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if any(m in first for m in _READ_FAILURES):
            reason = "unreadable (corrupt or truncated files?)"
        else:
            reason = f"does not fit model {model_name!r}"
        raise shd.ConfigError(f"init_params_from={path!r}: {reason} ({first})") from None


# tensorstore's words for a file it could not read, as opposed to a tree or shape mismatch
_READ_FAILURES = ("DATA_LOSS", "OUT_OF_RANGE", "Error reading", "Error opening", "corrupt")


def restore_or_init(
    run: Run, ckpt: checkpoint.Checkpointer, train_it, log: Callable[[str], None] = print
) -> tuple[TrainState, TrainState]:
    """(state, state shardings): the newest good checkpoint (and the data iterator moved to its
    position), else a fresh sharded init, with params from an HF folder (config.model) or an
    exported params checkpoint (config.init_params_from) when given."""
    state_sh = run.state_shardings()
    restored = ckpt.restore_latest(run.abstract_state(), state_sh)
    if restored is not None:
        state, data_state, _ = restored
        train_it.set_state(data_state)
        log(f"resumed from {ckpt.directory} at step {int(state.step)}")
        return state, state_sh
    state = build_lib.init_state(
        run.init_fn, run.tx, state_sh, run.mesh, run.rules, run.config.train.seed
    )
    if run.hf_dir is not None:
        # Host numpy -> sharded device arrays, leaf by leaf. Adam moments are zeros whatever the
        # params, so the freshly initialized optimizer state stays valid.
        hf_params = model.load_hf_checkpoint(run.hf_dir)[1]
        state = state.replace(params=jax.tree.map(jax.device_put, hf_params, state_sh.params))
        log(f"initialized params from HF checkpoint {run.hf_dir}")
    if run.config.init_params_from:
        abstract = jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
            state.params,
            state_sh.params,
        )
        state = state.replace(
            params=_load_init_params(run.config.init_params_from, abstract, run.config.model)
        )
        log(f"initialized params from {run.config.init_params_from}")
    return state, state_sh
