"""Params-only Orbax checkpoints: the hand-off format between stages, samplers and HF imports.

    <dir>/params/            Orbax StandardCheckpointer tree (float32 params)
    <dir>/model_config.json  the ModelConfig fields

CLI: convert an HF folder into a params checkpoint that training can start from:

    python -m model.export --hf_dir path/to/hf --out_dir runs/imported
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import jax

from model.config import ModelConfig, config_from_dict


def config_to_json(cfg: ModelConfig) -> str:
    return json.dumps(dataclasses.asdict(cfg), indent=2)


def config_from_json(text: str, where: str = "model_config.json") -> ModelConfig:
    try:
        return config_from_dict(json.loads(text))
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON at line {e.lineno}: {e.msg}") from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def save_params(path: str, cfg: ModelConfig, params) -> None:
    from model.orbax_io import ocp

    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(os.path.join(path, "params"), params, force=True)
    # Every process of a multi-process save writes the same config: a tmp name per process, or
    # one process's rename races another's (FileNotFoundError; the survivor then waits forever
    # in its next collective: the two-process test's hang).
    tmp = os.path.join(path, f"model_config.json.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(config_to_json(cfg))
    os.replace(tmp, os.path.join(path, "model_config.json"))  # atomic: never a half-written config


def restore_params(path: str, abstract_params=None):
    """The params tree of a checkpoint written by save_params; `abstract_params` (ShapeDtypeStructs,
    optionally with shardings) places them directly."""
    from model.orbax_io import ocp

    with ocp.StandardCheckpointer() as ckpt:
        # Installed before the restore (the first callbacks come while it fails); left in place
        # when it raises, since more keep arriving after the caller's error line.
        previous = _mute_closed_loop_callbacks()
        out = ckpt.restore(os.path.join(os.path.abspath(path), "params"), abstract_params)
        sys.unraisablehook = previous
        return out


def _mute_closed_loop_callbacks():
    """During and after a failed restore (a corrupt file), tensorstore still finishes the other
    in-flight reads and calls back into the asyncio loop orbax ran them on, closed by then: each
    callback is an unraisable RuntimeError('Event loop is closed') that Python prints as a
    traceback around the caller's one-line error. Drop exactly those; anything else still prints.
    Returns the previous hook."""
    previous = sys.unraisablehook

    def hook(unraisable):
        exc = unraisable.exc_value
        if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
            return
        previous(unraisable)

    sys.unraisablehook = hook
    return previous


def load_config(path: str) -> ModelConfig:
    """The ModelConfig of the params export in `path` (its model_config.json), params unread."""
    where = os.path.join(os.path.abspath(path), "model_config.json")
    if not os.path.exists(where):
        raise FileNotFoundError(
            f"{where}: not found (is {path} a params checkpoint from model.export?)"
        )
    with open(where) as f:
        return config_from_json(f.read(), where)


def load_params(path: str, shardings=None) -> tuple[ModelConfig, dict]:
    """-> (cfg, params). `shardings` (pytree of jax.sharding.Sharding) restores directly sharded."""
    from model.params import param_shapes

    path = os.path.abspath(path)
    cfg = load_config(path)
    shapes = param_shapes(cfg)
    if shardings is not None:
        shapes = jax.tree_util.tree_map(
            lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, shardings
        )
    return cfg, restore_params(path, shapes)


def main(argv=None):
    import argparse

    from model.hf import load_hf_checkpoint

    ap = argparse.ArgumentParser(
        description="Convert an HF DeepSeek-V3/Kimi-K2 folder into a params checkpoint."
    )
    ap.add_argument("--hf_dir", required=True)
    ap.add_argument("--out_dir", required=True)
    args = ap.parse_args(argv)
    cfg, params = load_hf_checkpoint(args.hf_dir)
    save_params(args.out_dir, cfg, params)
    from model.params import count_params

    total, active = count_params(cfg)
    print(f"wrote {args.out_dir}: {total / 1e6:.1f}M params ({active / 1e6:.1f}M active)")


if __name__ == "__main__":
    main()
