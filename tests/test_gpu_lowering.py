"""What the GPU will run, checked on CPU (issue 53): the mid config's train step (forward +
backward, AdamW, the trainer's own jitted step) and a decode step lowered for CUDA with
`jax.export`, our backend and tokamax's device query answering as an H200 (sm90;
model/kernels/lowering.py). The lowered StableHLO must call tokamax's Mosaic GPU kernels the
expected number of times, at the model's shapes, in bfloat16, and hold no XLA ragged_dot, no Triton
fallback and no [T, S] score tensor. Plus: one compile of a jitted kernel call (tokamax imported
before any trace); the all-to-all dispatch's backward through the Mosaic kernel; TPU where JAX
lowers Pallas TPU here.

Needs tokamax (the Python 3.12 leg of .ci/run); skips without it unless REQUIRE_TOKAMAX=1.
Time: 232 s at load ~10 (2 shared cores, another test run beside it), most of it the mid train
step's 15 Mosaic kernels lowered (~2-5 s each under that load; 50 s for the fixture at load 8
alone); the rest ~50 s. The decode step runs mid's shapes with 2 layers (1 dense + 1
MoE): its layers are unrolled, one array per layer (model/decode.py), so each MoE layer adds 3
identical kernel lowerings (~6 s) and nothing new to check.
"""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from model import presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tokamax_or_skip():
    from model.kernels import backend

    try:
        backend.tokamax()
    except ImportError:
        if os.environ.get("REQUIRE_TOKAMAX") == "1":
            raise
        pytest.skip("tokamax not installed (Python >= 3.12, JAX >= 0.11)")


@pytest.fixture(scope="module")
def lowering():
    _tokamax_or_skip()
    from model.kernels import lowering

    return lowering


B, T = 8, 2048  # bench_gpu's train shapes


def _mid(**changes):
    cfg = presets.get("mid", moe_impl="tokamax", attention_impl="tokamax")
    return cfg.replace(dtype="bfloat16", num_mtp_modules=0, **changes)


@pytest.fixture(scope="module")
def train_text(lowering):
    """The mid config's train step (tokamax:tokamax, bf16 compute, f32 params + AdamW) lowered for
    an H200, with nothing allocated: the trainer's jitted step on ShapeDtypeStructs."""
    from bench.common import synthetic_batch, train_setup
    from model.sharding import DEFAULT_RULES, mesh_context

    cfg = _mid()
    one = jax.devices()[:1]  # one GPU's program; conftest simulates 8 CPU devices
    with lowering.emulate("h200"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(jax, "devices", lambda *a: one)
        state, step, mesh = train_setup(cfg, {"data": 1}, allocate=False)
        batch = synthetic_batch(B, T, cfg.vocab_size)
        batch = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), batch)
        with mesh_context(mesh, DEFAULT_RULES):
            return cfg, lowering.export_text(step.jitted, state, batch, target="h200")


def _split(calls):
    """Mosaic calls -> (attention calls: a rank-4 operand, grouped GEMM calls: the rest)."""
    attention = [c for c in calls if len(c[0].split("x")) == 5]  # e.g. 8x2048x16x192xbf16
    return attention, [c for c in calls if c not in attention]


def test_train_step_runs_mosaic_kernels_only(lowering, train_text):
    cfg, text = train_text
    counts = lowering.kernel_counts(text)
    # Call sites: the 7 MoE layers are one nn.scan body (deeper than 4 layers: scanned), the dense
    # layer its own stack. Attention: 2 stacks x (forward + dq + dk/dv backward kernels) = 6;
    # grouped GEMM: gate, up, down forward + each one's d_lhs and d_rhs = 9. Per step the GPU then
    # runs 8 x 3 attention and 7 x 9 grouped-GEMM kernels.
    assert counts == {"mosaic_gpu": 15, "pallas_tpu": 0, "triton": 0, "cudnn": 0, "ragged_dot": 0}
    attention, grouped = _split(lowering.kernel_operands(text))
    assert len(attention) == 6 and len(grouped) == 9
    h, k, v = cfg.num_attention_heads, cfg.qk_head_dim, cfg.v_head_dim
    for call in attention:  # q, k in bf16 at K 192, v at V 128; the f32 are log-sum-exp residuals
        assert call[:3] == [f"{B}x{T}x{h}x{k}xbf16"] * 2 + [f"{B}x{T}x{h}x{v}xbf16"], call
        assert all(t == f"{B}x{h}x{T}xf32" for t in call if t.endswith("f32")), call
    rows = B * T * cfg.num_experts_per_tok  # 131,072 sorted assignments
    d, f, e = cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    floats = sorted({t for call in grouped for t in call if not t.endswith("i32")})
    assert floats == sorted(
        {f"{rows}x{d}xbf16", f"{rows}x{f}xbf16", f"{e}x{d}x{f}xbf16", f"{e}x{f}x{d}xbf16"}
        | {f"{d}x{rows}xbf16", f"{f}x{rows}xbf16"}  # the weight gradients' transposed lhs
    )


def test_train_step_holds_no_attention_scores(lowering, train_text):
    cfg, text = train_text
    blocks = (T, 128)  # the whole query length, or the blocked kernel's query blocks
    assert lowering.score_tensors(text, B, cfg.num_attention_heads, blocks, T) == []


def _attention(impl: str, b: int, t: int):
    """train_attention over one document per row, as a function of (q, k, v)."""
    from model.kernels import attention as attn

    pos = jnp.zeros((b, t), jnp.int32)
    return lambda q, k, v: attn.train_attention(
        q, k, v, q_positions=pos, q_segments=pos, k_positions=pos, k_segments=pos, scale=0.1,
        impl=impl,
    )  # fmt: skip


def test_the_detectors_see_what_they_look_for(lowering):
    """The checks above can fail: blocked attention's scores, a Triton fallback (float32 flash
    attention, which Mosaic refuses) and XLA's ragged_dot are found."""
    from model.kernels import gmm

    h = 16
    q = jax.ShapeDtypeStruct((B, T, h, 192), jnp.bfloat16)
    v = jax.ShapeDtypeStruct((B, T, h, 128), jnp.bfloat16)
    f32 = jax.ShapeDtypeStruct((1, 256, 2, 64), jnp.float32)
    with lowering.emulate("h200"):
        blocked = lowering.export_text(_attention("blocked", B, T), q, q, v, target="h200")
        triton = lowering.export_text(_attention("tokamax", 1, 256), f32, f32, f32, target="h200")
    assert lowering.score_tensors(blocked, B, h, (T, 128), T)  # [B,H,128,S] float32 blocks
    assert lowering.kernel_counts(triton)["triton"] == 1
    x = jax.ShapeDtypeStruct((256, 64), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((4, 64, 32), jnp.bfloat16)
    sizes = jnp.full((4,), 64, jnp.int32)
    with lowering.emulate("h200"):
        text = lowering.export_text(
            lambda x, w: gmm.grouped_matmul(x, w, sizes, impl="ragged"), x, w, target="h200"
        )
    assert lowering.kernel_counts(text)["ragged_dot"] == 1


def test_decode_step_runs_the_grouped_gemm_in_bf16(lowering):
    """One greedy decode step of the engine's forward (model/decode.py: per-layer params and
    latent caches) at batch 64 against a 512-token cache, in the engine's GPU dtype."""
    from model import decode, param_shapes

    cfg = decode.engine_config(_mid(num_hidden_layers=2), "gpu")  # bf16 params, cache, compute
    assert (cfg.decode_dtype, cfg.dtype) == ("bfloat16", "bfloat16")
    batch, cache_len = 64, 512
    params = jax.eval_shape(
        lambda p: decode.split_layers(decode.decode_params(cfg, p)), param_shapes(cfg)
    )
    caches = jax.eval_shape(lambda: decode.init_layer_caches(cfg, batch, cache_len, jnp.bfloat16))
    tokens = jax.ShapeDtypeStruct((batch, 1), jnp.int32)

    def step(params, tokens, positions, caches):
        out = decode.forward_cached_layers(cfg, params, tokens, positions, caches)
        return out.logits, out.cache

    with lowering.emulate("h200"):
        text = lowering.export_text(step, params, tokens, tokens, caches, target="h200")
    counts = lowering.kernel_counts(text)
    # gate, up, down per MoE layer (1 here: 3 x num_moe_layers in general); decode attention is
    # the absorbed MLA einsum over the latent cache (no fused kernel: bench/RESULTS.md "GPU").
    assert counts["mosaic_gpu"] == 3 * cfg.num_moe_layers
    assert counts["ragged_dot"] == counts["triton"] == 0
    rows = batch * cfg.num_experts_per_tok
    for call in lowering.kernel_operands(text):
        assert call[0] in (f"{rows}x{cfg.hidden_size}xbf16", f"{rows}x1024xbf16"), call
        assert call[1].endswith("xbf16"), call


def test_alltoall_backward_through_the_mosaic_kernel_passes_the_type_check(lowering):
    """Expert-parallel dispatch (2 expert shards) with tokamax's Mosaic grouped GEMM: its VJP's
    cotangents are typed as not varying over the mesh, which shard_map's varying-axes check
    rejected ('the manual axis types do not match') until moe_a2a turned the check off for it."""
    import flax.linen as nn
    from jax.sharding import AxisType

    from model import moe_a2a
    from model import sharding as sh

    mesh = jax.make_mesh((1, 1, 2, 1, 1), sh.MESH_AXES, axis_types=(AxisType.Auto,) * 5)
    n, d, f, e, k = 64, 256, 128, 4, 2
    bf16 = lambda *s: jax.ShapeDtypeStruct(s, jnp.bfloat16)
    ids, weights = (
        jax.ShapeDtypeStruct((n, k), jnp.int32),
        jax.ShapeDtypeStruct((n, k), jnp.float32),
    )

    def loss(x, ids, weights, wi_gate, wi_up, wo):
        lay = moe_a2a.current_layout()
        y, _ = moe_a2a.dispatch_alltoall(x, ids, weights, wi_gate, wi_up, wo, lay, impl="tokamax")
        return y.astype(jnp.float32).sum()

    grad = jax.grad(loss, argnums=(0, 3, 4, 5))
    with lowering.emulate("h200"), jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
        text = lowering.export_text(
            grad, bf16(n, d), ids, weights, bf16(e, d, f), bf16(e, d, f), bf16(e, f, d),
            target="h200",
        )  # fmt: skip
    counts = lowering.kernel_counts(text)
    assert counts["mosaic_gpu"] >= 6 and counts["ragged_dot"] == 0  # forward 3 + backward


def test_tpu_grouped_gemm_lowers_to_pallas_and_attention_refuses_the_document_mask(lowering):
    """TPU, as far as it lowers here: the grouped GEMM (forward + backward) becomes 3 Pallas TPU
    kernels. Not the train step: under the trainer's mesh of this machine's CPU devices Pallas TPU
    reads the chip as 'cpu' and refuses. And tokamax 0.0.17's TPU flash attention refuses the
    packed-document mask (`k_start`): on TPU, attention 'auto' has no kernel yet (RESULTS)."""
    from model.kernels import gmm

    x, w = (
        jax.ShapeDtypeStruct((4096, 2048), jnp.bfloat16),
        jax.ShapeDtypeStruct((32, 2048, 1024), jnp.bfloat16),
    )
    sizes = jnp.full((32,), 128, jnp.int32)
    loss = lambda x, w: gmm.grouped_matmul(x, w, sizes, impl="tokamax").astype(jnp.float32).sum()
    with lowering.emulate("tpu"):
        text = lowering.export_text(jax.grad(loss, (0, 1)), x, w, target="tpu")
    assert lowering.kernel_counts(text) == {
        "mosaic_gpu": 0, "pallas_tpu": 3, "triton": 0, "cudnn": 0, "ragged_dot": 0,
    }  # fmt: skip
    q = jax.ShapeDtypeStruct((2, 256, 4, 192), jnp.bfloat16)
    v = jax.ShapeDtypeStruct((2, 256, 4, 128), jnp.bfloat16)
    with lowering.emulate("tpu"), pytest.raises(NotImplementedError, match="k_start"):
        lowering.export_text(_attention("tokamax", 2, 256), q, q, v, target="tpu")


def test_a_jitted_kernel_call_compiles_once():
    """tokamax imported for the first time inside a trace changes JAX's tracing context (its
    config values), so the first call's cache key misses on the second call: `jit(train_step)`
    compiled twice (issue 53: 7.6 s + 7.7 s for the tiny preset on CPU). model.kernels now imports
    it with itself. A fresh process (here tokamax is long imported), a jitted grouped GEMM's
    gradient called 3 times (on CPU, tokamax's XLA reference): one cache entry (2 before). The
    trainer's tiny step shows the same but takes ~80 s to set up and compile at load ~8."""
    _tokamax_or_skip()
    script = textwrap.dedent("""
        import sys
        import jax
        import jax.numpy as jnp
        from model.kernels import gmm
        assert "tokamax" in sys.modules, "tokamax not imported with model.kernels"
        sizes = jnp.array([3, 5], jnp.int32)
        loss = lambda x, w: gmm.grouped_matmul(x, w, sizes, impl="tokamax").sum()
        step = jax.jit(jax.grad(loss, (0, 1)))
        x, w = jnp.ones((8, 4)), jnp.ones((2, 4, 3))
        for _ in range(3):
            jax.block_until_ready(step(x, w))
        print("compiles", step._cache_size())
    """)
    env = dict(os.environ, PYTHONPATH=ROOT, XLA_FLAGS="")
    p = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "compiles 1" in p.stdout, p.stdout
