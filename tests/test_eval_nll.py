"""Held-out NLL / bits-per-byte through train/'s eval step vs a direct forward of the tiny model
(float64 log-softmax on the host) over the same held-out batches, at two context lengths."""

import math

import jax
import numpy as np
import pytest

from configs import eval as eval_config
from eval.nll import held_out_batches, heldout_nll
from eval.run import _data_config
from model import Transformer, presets


def _reference(cfg, params, batches):
    forward = jax.jit(
        lambda p, t, pos, seg: (
            Transformer(cfg).apply({"params": p}, t, positions=pos, segment_ids=seg).logits
        )
    )
    ce = nbytes = weight = 0.0
    for b in batches:
        out = forward(params, b["tokens"], b["positions"], b["segment_ids"])
        logits = np.asarray(out, np.float64)
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        nll = -np.take_along_axis(logp, b["targets"][..., None], -1)[..., 0]
        mask = b["loss_mask"].astype(np.float64)
        ce += float((nll * mask).sum())
        weight += float(mask.sum())
        nbytes += float((b["target_bytes"] * mask).sum())
    return ce / weight, ce / math.log(2) / nbytes


def test_nll_matches_direct_forward_on_heldout_code(tiny_model):
    run_config = eval_config.get_config()  # the default run's held-out split (stdlib code)
    cfg, params = tiny_model
    lengths = [16, 32]
    metrics, items, tokens = heldout_nll(
        cfg, params, run_config, lengths, batch_size=8, num_batches=1
    )
    for length in lengths:
        batches = held_out_batches(run_config, cfg.vocab_size, length, 8, 1)
        assert batches[0]["tokens"].shape == (8, length)
        nll, bpb = _reference(cfg, params, batches)
        assert metrics[f"nll@{length}"] == pytest.approx(nll, rel=1e-5)
        assert metrics[f"bits_per_byte@{length}"] == pytest.approx(bpb, rel=1e-5)
    assert [it["context_length"] for it in items] == lengths
    assert tokens["target"] == sum(it["targets"] for it in items) > 0


def test_context_longer_than_model_is_an_error():
    config = eval_config.get_config()
    cfg = presets.get("tiny")
    with pytest.raises(ValueError, match="max_position_embeddings"):
        heldout_nll(
            cfg, None, config, [cfg.max_position_embeddings + 1], batch_size=8, num_batches=1
        )


def test_heldout_split_without_targets_is_an_error(tiny_model):
    """SFT traces (1.5-4.5 KB) never fit 32 tokens whole: an empty split must not read as NLL 0."""
    config = eval_config.get_config()
    config.eval.data_config = "configs/sft.py"
    cfg, params = tiny_model
    with pytest.raises(ValueError, match="no held-out targets at context length 32"):
        heldout_nll(cfg, params, _data_config(config), [32], batch_size=8, num_batches=1)
