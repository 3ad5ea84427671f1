"""Training stages: held-out bits/byte vs a hand computation, model_overrides (YaRN for the
long-context stage), params of one stage loading into the next, and a pipeline run's eval logs."""

import glob
import math
import os
import sys

import jax
import numpy as np
import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_TESTS), _TESTS]
from test_train_standin import STANDIN_RULES, standin_setup  # noqa: E402


def _mesh():
    from train import sharding as shd

    return shd.make_mesh(dict(data=jax.device_count(), fsdp=1, expert=1, tensor=1))


def test_eval_bits_per_byte_matches_hand_computation():
    """evaluate()'s arithmetic (sums over batches, masks, bytes): the stand-in model suffices."""
    from train import trainer
    from train.evaluate import evaluate

    su, mesh = standin_setup(), _mesh()
    params = su.init_fn(jax.random.PRNGKey(3))
    rng = np.random.default_rng(0)
    b, t, vocab = jax.device_count(), 6, 64
    batches = []
    for _ in range(2):
        tokens = rng.integers(0, vocab, (b, t)).astype(np.int32)
        batches.append(
            dict(
                tokens=tokens,
                targets=rng.integers(0, vocab, (b, t)).astype(np.int32),
                segment_ids=np.ones((b, t), np.int32),
                positions=np.tile(np.arange(t, dtype=np.int32), (b, 1)),
                loss_mask=(rng.random((b, t)) < 0.7).astype(np.float32),
                target_bytes=rng.integers(0, 4, (b, t)).astype(np.int32),
            )
        )  # 0: specials; 1-3 byte tokens
    p_sh = jax.tree.map(
        lambda x: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()), params
    )
    eval_fn = trainer.jit_eval_step(su.loss_fn, p_sh, mesh, STANDIN_RULES)
    got = evaluate(eval_fn, params, batches, mesh)

    nll_sum = byte_sum = tokens = 0.0
    for batch in batches:
        logits = np.asarray(su.apply(params, batch).logits, np.float64)
        logp = (
            logits
            - np.log(np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1, keepdims=True))
            - logits.max(-1, keepdims=True)
        )
        nll = -np.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0]
        nll_sum += np.sum(nll * batch["loss_mask"])
        byte_sum += np.sum(batch["target_bytes"] * batch["loss_mask"])
        tokens += np.sum(batch["loss_mask"])
    np.testing.assert_allclose(got["nll"], nll_sum / tokens, rtol=1e-5)
    np.testing.assert_allclose(got["bits_per_byte"], nll_sum / math.log(2) / byte_sum, rtol=1e-5)
    assert got["targets"] == tokens
    # Without target_bytes (stand-in data) only the NLL is reported.
    no_bytes = [{k: v for k, v in x.items() if k != "target_bytes"} for x in batches]
    assert set(evaluate(eval_fn, params, no_bytes, mesh)) == {"nll", "targets"}
    # No targets at all: no number (NaN) and a zero count, never a perfect-looking 0.0 loss.
    masked = [dict(x, loss_mask=np.zeros_like(x["loss_mask"])) for x in batches]
    empty = evaluate(eval_fn, params, masked, mesh)
    assert empty["targets"] == 0 and np.isnan(empty["nll"])


def test_model_overrides_merge_rope_scaling_and_reject_unknown_fields():
    from configs import long_context, pretrain
    from model.errors import ConfigError
    from train.model_config import model_config

    base = model_config(_tiny(pretrain.get_config()))[0]
    c = _tiny(long_context.get_config())
    cfg = model_config(c)[0]
    assert cfg.rope_scaling.factor == 16.0  # 2048 / 128
    assert cfg.rope_scaling.original_max_position_embeddings == 128
    assert cfg.rope_scaling.beta_fast == base.rope_scaling.beta_fast  # merged, not replaced
    assert cfg.max_position_embeddings == 2048 and cfg.hidden_size == base.hidden_size
    c.model_overrides.hiden_size = 8
    with pytest.raises(
        ConfigError, match="model_overrides: unknown ModelConfig field 'hiden_size'"
    ):
        model_config(c)
    c = _tiny(long_context.get_config())
    c.model_overrides.rope_scaling.fator = 2.0
    with pytest.raises(ConfigError, match="unknown rope_scaling field 'fator'"):
        model_config(c)
    c = _tiny(long_context.get_config())
    c.model_overrides.rope_scaling.factor = 0.5  # ModelConfig's own validation still applies
    with pytest.raises(ConfigError, match="rope_scaling.factor must be >= 1"):
        model_config(c)


def _tiny(c):
    c.model = "tiny"
    c.train.update(batch_size=8, eval_batches=1)
    return c


def _restore(config, workdir):
    from train import checkpoint, trainer

    r = trainer.build(config)
    with checkpoint.Checkpointer(str(workdir), keep=1, async_save=False) as ckpt:
        state, _ = trainer.restore_or_init(r, ckpt, None, log=lambda s: None)
    return r, jax.device_get(state)


def test_long_context_stage_starts_from_pretrain_params(tmp_path):
    """(a)'s params (exported by train/ or written by model/export.py, e.g. an HF import: one
    format) load bitwise into (b), whose model differs only in YaRN; the optimizer starts fresh."""
    from configs import long_context, pretrain
    from model import export

    a_run, a_state = _restore(_tiny(pretrain.get_config()), tmp_path / "a")
    params = jax.tree.map(lambda x: x + 0.5, a_state.params)  # not what (b)'s seed would init
    export.save_params(str(tmp_path / "export"), a_run.cfg, params)  # --mode=convert's writer
    c = _tiny(long_context.get_config())
    c.init_params_from = str(tmp_path / "export")
    b_run, b_state = _restore(c, tmp_path / "b")
    assert b_run.cfg.rope_scaling.factor == 16.0
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(b_state.params)):
        np.testing.assert_array_equal(x, y)
    assert int(b_state.step) == 0
    assert all(
        float(np.abs(m).max()) == 0
        for m in jax.tree.leaves(b_state.opt_state)
        if getattr(m, "ndim", 0) > 0
    )  # fresh Adam moments


def test_pipeline_run_logs_heldout_nll_and_bits_per_byte(tmp_path):
    """Tiny model on the stdlib pipeline: eval before the first step and at the end, in the log and
    TensorBoard. Byte tokenizer: each target covers <= 1 byte (0 for eos), so bpb >= nll / ln 2."""
    from configs import pretrain
    from train import trainer
    from train.tensorboard import read_scalars

    c = _tiny(pretrain.get_config())
    c.train.update(
        steps=2,
        batch_size=8,
        seq_len=32,
        eval_every=2,
        log_every=1,
        warmup_steps=1,
        mtp_mode="none",
    )  # less to compile
    lines = []
    trainer.train(c, str(tmp_path), log=lines.append)
    assert any(l.startswith("step 0: initial held-out loss") for l in lines), lines
    assert any(l.startswith("step 2: final held-out loss") and "bits/byte" in l for l in lines)
    events = read_scalars(glob.glob(str(tmp_path / "tb" / "events.*"))[0])
    nll = {s: v for s, tag, v in events if tag == "eval/nll"}
    bpb = {s: v for s, tag, v in events if tag == "eval/bits_per_byte"}
    assert sorted(nll) == sorted(bpb) == [0, 2]
    for s in nll:
        assert nll[s] / math.log(2) * (1 - 1e-6) <= bpb[s] < 1.2 * nll[s] / math.log(2)
    assert nll[2] < nll[0]
