"""Kernel dispatch (model/kernels/): every implementation of training attention and of the MoE's
grouped matmuls equals a plain reference in value and gradient, through the same wrappers the model
calls; 'auto' picks by backend; the shape-only stand-ins compile and refuse to run.

The tokamax cases need tokamax (Python >= 3.12, JAX >= 0.11): on CPU they run tokamax's XLA
reference implementations, so the wrappers (mask conversion, q_index, group sizes, VJPs) cannot rot.
They skip where tokamax is missing, unless REQUIRE_TOKAMAX=1 (the Python 3.12 leg of .ci/run),
where a skip would hide a broken install and is an error instead. 64 s under Python 3.12 at load
~8 on 2 cores (2026-11-28); its tokamax cases dominate.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import Transformer, init_params, presets
from model import moe as moe_lib
from model.kernels import attention as attn
from model.kernels import backend, choice, gmm

REQUIRE_TOKAMAX = os.environ.get("REQUIRE_TOKAMAX") == "1"


def _tokamax_available() -> bool:
    try:
        backend.tokamax()
        return True
    except ImportError:
        if REQUIRE_TOKAMAX:
            raise
        return False


TOKAMAX = pytest.param(
    "tokamax",
    marks=pytest.mark.skipif(not _tokamax_available(), reason="tokamax not installed"),
)

# --- attention ------------------------------------------------------------------------------------

# Two packed documents and trailing padding (segment 0), positions restarting per document.
SEGMENTS = [1] * 10 + [2] * 9 + [0] * 5
POSITIONS = list(range(10)) + list(range(9)) + [0] * 5
B, T, H, K, V = 2, len(SEGMENTS), 2, 12, 8  # MLA-like: q/k head dim != v head dim


def _qkv(dtype=jnp.float32, seed=0):
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(seed), 3)
    return (
        jax.random.normal(kq, (B, T, H, K), dtype),
        jax.random.normal(kk, (B, T, H, K), dtype),
        jax.random.normal(kv, (B, T, H, V), dtype),
    )


def _rows():
    seg = jnp.broadcast_to(jnp.array(SEGMENTS, jnp.int32), (B, T))
    pos = jnp.broadcast_to(jnp.array(POSITIONS, jnp.int32), (B, T))
    return pos, seg


def _reference(q, k, v, pos, seg, scale):
    """Dense masked softmax attention in float32 at HIGHEST precision (the definition)."""
    with jax.default_matmul_precision("highest"):
        q, k, v = (a.astype(jnp.float32) for a in (q, k, v))
        s = jnp.einsum("BTHK,BSHK->BHTS", q, k) * scale
        mask = attn.attention_mask(pos, seg, pos, seg)[:, None]
        p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1)
        return jnp.einsum("BHTS,BSHV->BTHV", p, v)


def _attend(impl, q, k, v, pos, seg, scale, q_index=None, q_rows=None):
    q_rows = slice(None) if q_rows is None else q_rows
    return attn.train_attention(
        q[:, q_rows],
        k,
        v,
        q_positions=pos[:, q_rows],
        q_segments=seg[:, q_rows],
        k_positions=pos,
        k_segments=seg,
        scale=scale,
        impl=impl,
        q_index=q_index,
    )


REAL = np.array(SEGMENTS) > 0  # padding rows' outputs are never read; compared rows only


@pytest.mark.parametrize("impl", ["blocked", TOKAMAX])
def test_attention_equals_the_dense_reference_in_value_and_gradient(impl, monkeypatch):
    monkeypatch.setattr(attn, "QUERY_BLOCK", 8)  # 3 causal query blocks over the 24 rows
    q, k, v = _qkv()
    pos, seg = _rows()
    scale = K**-0.5
    probe = jax.random.normal(jax.random.PRNGKey(9), (B, T, H, V)) * REAL[None, :, None, None]

    def value_and_grad(f):  # jitted: eager op-by-op dispatch of the gradients costs seconds
        loss = lambda *a: jnp.sum(f(*a) * probe)
        return jax.jit(lambda *a: (f(*a), jax.grad(loss, argnums=(0, 1, 2))(*a)))(q, k, v)

    want, g_want = value_and_grad(lambda *a: _reference(*a, pos, seg, scale))
    got, g_got = value_and_grad(lambda *a: _attend(impl, *a, pos, seg, scale))
    np.testing.assert_allclose(got[:, REAL], want[:, REAL], atol=2e-5, rtol=1e-5)
    for a, b in zip(g_got, g_want):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4)
    assert float(jnp.abs(g_want[1]).max()) > 1e-2  # keys get a real gradient


@pytest.mark.parametrize("impl", [TOKAMAX])
def test_fused_attention_in_bf16_is_within_bf16_tolerance_of_blocked(impl):
    q, k, v = _qkv(jnp.bfloat16, seed=1)
    pos, seg = _rows()
    got = _attend(impl, q, k, v, pos, seg, K**-0.5).astype(jnp.float32)
    want = _attend("blocked", q, k, v, pos, seg, K**-0.5).astype(jnp.float32)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got[:, REAL], want[:, REAL], atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("impl", ["blocked", TOKAMAX])
def test_zigzag_query_chunks_with_q_index_equal_the_full_rows(impl):
    """Context parallelism's shape of the call: a shard holds query chunks (i, 2C-1-i) of the row
    and attends over all keys; q_index tells each query's index in the row."""
    q, k, v = _qkv(seed=2)
    pos, seg = _rows()
    full = _attend(impl, q, k, v, pos, seg, K**-0.5)
    c = T // 4  # 4 chunks, 2 shards: chunks (0, 3) and (1, 2)
    for first, second in ((0, 3), (1, 2)):
        rows = np.r_[first * c : (first + 1) * c, second * c : (second + 1) * c]
        q_index = jnp.broadcast_to(jnp.asarray(rows, jnp.int32), (B, len(rows)))
        got = _attend(impl, q, k, v, pos, seg, K**-0.5, q_index=q_index, q_rows=rows)
        keep = REAL[rows]
        np.testing.assert_allclose(got[:, keep], full[:, rows][:, keep], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", [TOKAMAX])
def test_fused_attention_under_a_mesh_runs_per_shard_and_equals_blocked(impl):
    """Under the trainer's mesh context (batch over data, heads over tensor) the kernel runs in a
    shard_map per shard (a Pallas call left to GSPMD would run replicated): same values."""
    from model import sharding as sh

    q, k, v = _qkv(seed=3)
    pos, seg = _rows()
    mesh = sh.role_mesh({"data": 2, "tensor": 2}, jax.devices()[:4])
    want = _attend("blocked", q, k, v, pos, seg, K**-0.5)
    with sh.mesh_context(mesh, sh.DEFAULT_RULES):
        assert attn._q_sharding().spec == jax.sharding.PartitionSpec(
            ("data", "fsdp"), None, "tensor", None
        )
        got = jax.jit(lambda *a: _attend(impl, *a, pos, seg, K**-0.5))(q, k, v)
    np.testing.assert_allclose(got[:, REAL], want[:, REAL], atol=2e-5, rtol=1e-5)
    assert attn._q_sharding() is None  # outside a mesh: a plain call


def test_opaque_attention_under_a_mesh_runs_per_shard():
    """The shape-only stand-in is wrapped per shard like the real kernel: its callback's output is
    one shard's [B/2, T, H/2, V] (batch over data, heads over tensor), not the global [B, T, H, V]
    GSPMD would replicate on every device."""
    from model import sharding as sh

    q, k, v = _qkv(seed=3)
    pos, seg = _rows()
    mesh = sh.role_mesh({"data": 2, "tensor": 2}, jax.devices()[:4])
    with sh.mesh_context(mesh, sh.DEFAULT_RULES):
        text = jax.jit(lambda *a: _attend("opaque", *a, pos, seg, 1.0)).lower(q, k, v).as_text()
    calls = [line for line in text.splitlines() if "custom_call" in line and "callback" in line]
    assert calls and all(f"tensor<{B // 2}x{T}x{H // 2}x{V}xf32>" in c for c in calls), calls
    assert not any(f"tensor<{B}x{T}x{H}x{V}xf32>" in c for c in calls), calls


def test_document_starts_mark_each_run_of_a_segment():
    seg = jnp.array([[1, 1, 1, 2, 2, 0, 0], [3, 3, 3, 3, 3, 3, 3]])
    np.testing.assert_array_equal(
        attn.document_starts(seg), [[0, 0, 0, 3, 3, 5, 5], [0, 0, 0, 0, 0, 0, 0]]
    )


# --- 'auto' ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "platform, attention, moe",
    [("cpu", "blocked", "blocked"), ("gpu", "tokamax", "tokamax"), ("tpu", "tokamax", "tokamax")],
)
def test_auto_picks_blocked_on_cpu_and_tokamax_on_accelerators(
    platform, attention, moe, monkeypatch
):
    monkeypatch.setattr(backend, "platform", lambda: platform)
    assert backend.resolve("auto", "blocked", "tokamax") == attention
    assert choice.moe_impl("auto") == moe
    assert choice.moe_impl("dense") == "dense"  # a name given explicitly stays
    comm = "gspmd" if platform == "cpu" else "alltoall"  # one device: nothing to exchange
    assert choice.moe_comm("auto", 8) == comm and choice.moe_comm("auto", 1) == "gspmd"
    assert choice.moe_comm("gspmd", 8) == "gspmd"
    assert presets.get("tiny").moe_impl == "auto" and presets.get("tiny").attention_impl == "auto"


def test_bad_kernel_names_are_config_errors():
    with pytest.raises(ValueError, match="attention_impl must be one of"):
        presets.get("tiny", attention_impl="flash")
    with pytest.raises(ValueError, match="moe_impl must be one of"):
        presets.get("tiny", moe_impl="megablox")


# --- grouped matmuls ------------------------------------------------------------------------------


def _moe_case(seed=3, n=24):
    cfg = presets.get("tiny")
    e, d, f = cfg.n_routed_experts, cfg.hidden_size, cfg.moe_intermediate_size
    keys = jax.random.split(jax.random.PRNGKey(seed), 5)
    x = jax.random.normal(keys[0], (n, d))
    r = moe_lib.route(x, jax.random.normal(keys[1], (d, e)), jnp.zeros(e), cfg)
    w = [jax.random.normal(k, s) * 0.1 for k, s in zip(keys[2:], [(e, d, f), (e, d, f), (e, f, d)])]
    valid = jnp.arange(n) % 5 != 2  # some rows get no expert (padding, cache-only decode rows)
    return x, r, w, valid


@pytest.mark.parametrize("impl", ["ragged", TOKAMAX])
def test_grouped_dispatch_equals_dense_in_value_and_gradient(impl):
    x, r, w, valid = _moe_case()
    gated = moe_lib.zero_invalid(r, valid)
    grouped = lambda x, *w: moe_lib.dispatch_grouped(x, r, *w, impl, valid=valid)
    dense = lambda x, *w: moe_lib.dispatch_dense(x, gated, *w)
    value_and_grad = lambda f: jax.jit(
        lambda *a: (f(*a), jax.grad(lambda *b: jnp.sum(f(*b) ** 2), argnums=(0, 1, 2, 3))(*a))
    )(x, *w)
    got, g_got = value_and_grad(grouped)
    want, g_want = value_and_grad(dense)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(got[~np.asarray(valid)], 0.0)
    for a, b in zip(g_got, g_want):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("impl", ["ragged", TOKAMAX])
def test_alltoall_experts_through_grouped_kernels_equal_dense(impl):
    """Expert parallelism (moe_comm='alltoall', 8 devices: expert 4 x data 2) with each device's
    local experts through the grouped kernels, invalid rows included: value and gradient."""
    from model import moe_a2a
    from model import sharding as sh

    x, r, w, valid = _moe_case(n=32)
    gated = moe_lib.zero_invalid(r, valid)
    mesh = sh.role_mesh({"expert": 4, "data": 2}, jax.devices()[:8])
    lay = moe_a2a.layout_from_rules(sh.DEFAULT_RULES, dict(mesh.shape))
    a2a = lambda x, *w: moe_a2a.dispatch_alltoall(
        x, gated.expert_ids, gated.weights, *w, lay, impl=impl, valid=valid
    )[0]
    dense = lambda x, *w: moe_lib.dispatch_dense(x, gated, *w)
    value_and_grad = lambda f: jax.jit(
        lambda *a: (f(*a), jax.grad(lambda *b: jnp.sum(f(*b) ** 2), argnums=(0, 1, 2, 3))(*a))
    )(x, *w)
    with sh.mesh_context(mesh, sh.DEFAULT_RULES):
        got, g_got = value_and_grad(a2a)
    want, g_want = value_and_grad(dense)
    np.testing.assert_allclose(got, want, atol=1e-5)
    for a, b in zip(g_got, g_want):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("impl", ["ragged", TOKAMAX])
def test_grouped_rows_past_the_groups_are_zero_whatever_the_kernel_leaves(impl):
    """Rows past sum(group_sizes) are no expert's: zero out, zero gradient in (a kernel may leave
    them unwritten; NaN there must not leak)."""
    r_rows, d, f, e = 12, 4, 3, 2
    xs = jax.random.normal(jax.random.PRNGKey(0), (r_rows, d)).at[-2:].set(jnp.nan)
    sizes = jnp.array([4, 6], jnp.int32)  # 10 live rows, 2 dead ones holding NaN
    ws = [
        jax.random.normal(jax.random.PRNGKey(i), s)
        for i, s in enumerate([(e, d, f), (e, d, f), (e, f, d)], 1)
    ]
    y = gmm.grouped_swiglu(xs, sizes, *ws, impl=impl)
    assert np.all(np.isfinite(y)) and np.all(np.asarray(y[10:]) == 0)
    dx = jax.grad(lambda a: jnp.sum(gmm.grouped_swiglu(a, sizes, *ws, impl=impl)))(xs)
    assert np.all(np.isfinite(dx)) and np.all(np.asarray(dx[10:]) == 0)


@pytest.fixture(scope="module")
def tiny_case():
    """The real tiny preset on two packed rows (one with padding), the loss's jitted value and
    gradient, and the reference run: blocked attention + dense experts."""
    cfg = presets.get("tiny")
    params = init_params(cfg, jax.random.PRNGKey(0))
    tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 16), 0, cfg.vocab_size)
    seg = jnp.array([[1] * 9 + [2] * 7, [1] * 12 + [0] * 4])
    pos = jnp.array([list(range(9)) + list(range(7)), list(range(12)) + [0] * 4])
    real = np.asarray(seg > 0)

    def loss(p, moe_impl, attention_impl):
        c = cfg.replace(moe_impl=moe_impl, attention_impl=attention_impl)
        out = Transformer(c).apply({"params": p}, tokens, positions=pos, segment_ids=seg)
        return jnp.sum(jax.nn.log_softmax(out.logits)[..., 3] * real), out.logits

    fn = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=(1, 2))
    return params, real, fn, fn(params, "dense", "blocked")


@pytest.mark.parametrize("impl", ["ragged", TOKAMAX])
def test_tiny_model_with_kernel_paths_equals_the_cpu_paths(impl, tiny_case):
    """Attention and experts through the kernel wrappers equal blocked attention + the dense
    experts, forward and gradient."""
    params, real, fn, ((want, want_logits), g_want) = tiny_case
    attention_impl = "tokamax" if impl == "tokamax" else "blocked"
    (got, got_logits), g_got = fn(params, impl, attention_impl)
    np.testing.assert_allclose(got_logits[real], want_logits[real], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(g_got), jax.tree.leaves(g_want)):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4, err_msg=jax.tree_util.keystr(path))


# --- shape-only stand-ins -------------------------------------------------------------------------


def test_opaque_kernels_keep_no_tokens_by_experts_buffer_and_refuse_to_run():
    """The compile-time stand-ins (for memory analysis): the grouped path's compiled temp memory is
    a fraction of ragged_dot's dense fallback ([E, A, F] per matmul), and running one raises."""
    a, d, f, e = 4096, 64, 128, 32
    lhs = jax.ShapeDtypeStruct((a, d), jnp.float32)
    w_in = jax.ShapeDtypeStruct((e, d, f), jnp.float32)
    w_out = jax.ShapeDtypeStruct((e, f, d), jnp.float32)
    sizes = jax.ShapeDtypeStruct((e,), jnp.int32)

    def temp_bytes(impl):
        loss = lambda xs, g, u, o, s: jnp.sum(gmm.grouped_swiglu(xs, s, g, u, o, impl=impl))
        step = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))
        return (
            step.lower(lhs, w_in, w_in, w_out, sizes).compile().memory_analysis().temp_size_in_bytes
        )

    dense_fallback = e * a * f * 4  # one [E, A, F] float32 intermediate
    assert temp_bytes("ragged") >= dense_fallback
    assert temp_bytes("opaque") < dense_fallback / 4
    with pytest.raises(Exception, match="compile-time stand-in"):
        jax.block_until_ready(
            gmm.grouped_matmul(
                jnp.ones((8, 4)), jnp.ones((2, 4, 3)), jnp.array([4, 4]), impl="opaque"
            )
        )
    q, k, v = _qkv()
    pos, seg = _rows()
    with pytest.raises(Exception, match="compile-time stand-in"):
        jax.block_until_ready(_attend("opaque", q, k, v, pos, seg, 1.0))
