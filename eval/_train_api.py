"""The train/ pieces the NLL suite reuses, in one place: the held-out `evaluate`, the held-out
batches of a run config, and the jitted eval step (never a second implementation of them)."""

from __future__ import annotations


def evaluate_fn():
    from train.evaluate import evaluate  # pylint: disable=import-outside-toplevel

    return evaluate


def held_out_batches(config, vocab_size: int) -> list[dict]:
    """The held-out batches a training run with this config evaluates on (data/'s pipeline)."""
    from train.batches import data_iterators  # pylint: disable=import-outside-toplevel

    return data_iterators(config, vocab_size)[1]


def jit_eval_fn(cfg, mesh_sizes: dict, rules=None):
    """(eval_fn(params, batch) -> sums, params shardings, mesh) for model config `cfg`: the
    training eval step with the LM loss (next-token CE; MTP and balance terms off)."""
    import model  # pylint: disable=import-outside-toplevel
    from model import sharding as model_sharding  # pylint: disable=import-outside-toplevel
    from train import sharding as shd  # pylint: disable=import-outside-toplevel
    from train import trainer  # pylint: disable=import-outside-toplevel
    from train.losses import make_lm_loss  # pylint: disable=import-outside-toplevel

    rules = tuple(rules or model_sharding.DEFAULT_RULES)
    mesh = shd.make_mesh(mesh_sizes)
    params_sh = shd.param_shardings(model.param_logical_specs(cfg), mesh, rules)
    loss_fn = make_lm_loss(cfg, mtp_mode="none", use_balance_loss=False)
    return trainer.jit_eval_step(loss_fn, params_sh, mesh, rules), params_sh, mesh
