"""Context parallelism (model/context.py) on 8 simulated CPU devices: the LM loss and its gradients
on meshes with a context axis equal the unsharded model's, on packed rows (several documents and
padding per row, positions restarting per document)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import context, param_logical_specs
from model import sharding as sh
from model.kernels import attention as attention_kernels
from train import sharding as shd
from train.losses import make_lm_loss

T = 32  # divisible by 2 x 8: every context size here


def test_zigzag_order_balances_causal_work():
    """Shard i holds chunks i and 2cp-1-i: the same number of (query, earlier key) pairs on every
    shard, and to_zigzag / from_zigzag are inverses."""
    cp, t = 4, 64
    order = context.zigzag_order(t, cp)
    assert sorted(order.tolist()) == list(range(t))
    np.testing.assert_array_equal(order[:16], list(range(8)) + list(range(56, 64)))
    work = [(order[i * 16 : (i + 1) * 16] + 1).sum() for i in range(cp)]  # keys seen per shard
    assert len(set(work)) == 1
    x = jnp.arange(2 * t).reshape(2, t)
    z = context.to_zigzag({"tokens": x}, cp)["tokens"]
    np.testing.assert_array_equal(context.from_zigzag(z, cp), x)
    with pytest.raises(ValueError, match="not divisible by 2 x 4"):
        context.zigzag_order(60, 4)


def _packed_batch(vocab: int, b: int = 2):
    """Two rows, each packing documents of uneven lengths and trailing padding (segment 0)."""
    rng = np.random.default_rng(0)
    lengths = [(11, 13, 5), (7, 20, 2)]
    seg, pos = np.zeros((b, T), np.int32), np.zeros((b, T), np.int32)
    for r, docs in enumerate(lengths):
        at = 0
        for d, n in enumerate(docs):
            seg[r, at : at + n], pos[r, at : at + n] = d + 1, np.arange(n)
            at += n
    tokens = rng.integers(1, vocab, (b, T)).astype(np.int32)
    targets = rng.integers(1, vocab, (b, T)).astype(np.int32)
    mask = (seg > 0).astype(np.float32)
    return dict(tokens=tokens, targets=targets, positions=pos, segment_ids=seg, loss_mask=mask)


def _loss_and_grads(cfg, params, batch, shape=None):
    loss_fn = make_lm_loss(cfg)
    fn = jax.value_and_grad(lambda p, b: loss_fn(p, b, None)[0])
    if shape is None:
        return jax.jit(fn)(params, batch)
    sizes = dict(zip(sh.MESH_AXES, shape))
    mesh = shd.make_mesh(sizes, jax.devices()[: int(np.prod(shape))])
    p_sh = shd.param_shardings(param_logical_specs(cfg), mesh, sh.DEFAULT_RULES)
    with sh.mesh_context(mesh, sh.DEFAULT_RULES):
        assert context.context_size() == sizes["context"]
        jitted = jax.jit(fn, in_shardings=(p_sh, shd.batch_sharding(mesh)))
        return jitted(jax.device_put(params, p_sh), batch)


@pytest.fixture(scope="module")
def unsharded(tiny_model):
    cfg, params = tiny_model
    batch = _packed_batch(cfg.vocab_size)
    return batch, _loss_and_grads(cfg, params, batch)


def _index_mask_kernel(q, k, v, *, q_positions, q_segments, k_positions, k_segments, scale, impl,
                       q_index=None):  # fmt: skip
    """The fused kernel's mask semantics in plain JAX: causal by key index against `q_index`, from
    each query's document start (model/kernels/attention.py's tokamax path), positions unused. If
    the gathered keys were not in row order or q_index were wrong, the loss would differ."""
    del q_positions, q_segments, k_positions, impl
    s = k.shape[1]
    if q_index is None:  # outside the context path (the abstract init trace): the row itself
        q_index = jnp.broadcast_to(jnp.arange(q.shape[1]), q.shape[:2])
    k_start = jnp.take_along_axis(attention_kernels.document_starts(k_segments), q_index, axis=1)
    idx = jnp.arange(s)[None, None, :]  # [1,1,S]
    mask = (idx <= q_index[:, :, None]) & (idx >= k_start[:, :, None])  # [B,T,S]
    scores = jnp.einsum("BTHK,BSHK->BHTS", q, k) * scale
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, -1e30), axis=-1)
    return jnp.einsum("BHTS,BSHV->BTHV", probs, v)


def _tokamax_missing() -> bool:
    """tokamax is importable only where Python >= 3.12 (.ci/run's second leg, REQUIRE_TOKAMAX=1,
    where a missing one is an error rather than a skip)."""
    from model.kernels import backend

    try:
        backend.tokamax()
        return False
    except ImportError:
        if os.environ.get("REQUIRE_TOKAMAX") == "1":
            raise
        return True


@pytest.mark.parametrize(
    "shape,moe_comm,kernel",
    [
        ((1, 2, 2, 1, 2), "alltoall", "blocked"),
        ((1, 1, 1, 2, 4), "gspmd", "index_mask"),
        pytest.param(
            (1, 1, 1, 2, 4),
            "gspmd",
            "tokamax",
            marks=pytest.mark.skipif(_tokamax_missing(), reason="tokamax not installed"),
        ),
    ],
    ids=[
        "fsdp2_expert2_context2_alltoall",
        "tensor2_context4_fused_mask",
        "tensor2_context4_tokamax",
    ],
)  # shape: (data, fsdp, expert, tensor, context)
def test_context_parallel_loss_and_grads_match_unsharded(
    tiny_model, unsharded, monkeypatch, shape, moe_comm, kernel
):
    """Two meshes with context > 1 (one with expert + fsdp and the all-to-all MoE dispatch, one
    with tensor): loss and every gradient within float32 rounding of the unsharded blocked
    model. The second runs the context-parallel attention with the fused kernel's mask (causal by
    index + document start, as tokamax gets it), checking what that path is given."""
    cfg, params = tiny_model
    cfg = cfg.replace(moe_comm=moe_comm)
    batch, (ref_loss, ref_grads) = unsharded
    if kernel == "index_mask":
        monkeypatch.setattr(context.kernels, "train_attention", _index_mask_kernel)
    if kernel == "tokamax":  # the real fused call (tokamax's XLA reference kernel on CPU)
        cfg = cfg.replace(attention_impl="tokamax")
    loss, grads = _loss_and_grads(cfg, params, batch, shape)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(ref_grads), jax.tree.leaves(grads), strict=True
    ):
        np.testing.assert_allclose(b, a, atol=2e-6, rtol=1e-4, err_msg=jax.tree_util.keystr(path))


def _long_context_run(context: int, workdir) -> tuple[list[str], dict]:
    """configs/long_context.py on the tiny model, 2 steps of 4 rows x 256 tokens, through the
    trainer main.py runs for --mode=pretrain (trainer.train), on the first 4 devices: data x
    context = 4. Synthetic rows and no held-out evaluation keep it to one compilation per mesh
    (packed documents are test_context_parallel_loss_and_grads_match_unsharded's). The stage's
    MTP loss is off: context parallelism refuses it (its targets shift along the sequence)."""
    from configs import long_context
    from train import trainer

    c = long_context.get_config()
    c.model = "tiny"
    c.trainer_devices = 4
    c.mesh.update(data=-1, fsdp=1, expert=1, tensor=1, context=context)
    c.data.source = "synthetic"
    c.train.update(steps=2, batch_size=4, seq_len=256, log_every=1, eval_every=1000)
    c.train.update(eval_batches=0, mtp_mode="none")
    c.train.eval_at_start = False
    c.checkpoint.update(every_steps=1000, async_save=False)
    lines = []
    state = trainer.train(c, str(workdir), log=lines.append)
    losses = [ln.split(" loss ")[1].split()[0] for ln in lines if ln.startswith("step ")]
    return losses, jax.device_get(state.params)


@pytest.mark.long  # the suite's slowest test (144 s on 2 cores): -m long
def test_long_context_stage_same_losses_with_context_2_and_4(tmp_path):
    """The long-context stage on 4 devices: data 4, data 2 x context 2 and context 4 give the
    same losses and the same params after 2 steps (float32, within rounding)."""
    ref_losses, ref_params = _long_context_run(1, tmp_path / "c1")
    assert len(ref_losses) == 2
    for cp in (2, 4):
        losses, params = _long_context_run(cp, tmp_path / f"c{cp}")
        assert losses == ref_losses, (cp, losses, ref_losses)
        for a, b in zip(jax.tree.leaves(ref_params), jax.tree.leaves(params), strict=True):
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-4)
