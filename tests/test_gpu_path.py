"""The GPU path's bugs that reading it against tokamax 0.0.17 found (issue 53), each tested on CPU
with the backend made to answer 'gpu' where that is the question: init on the reference kernels;
the grouped GEMM's implementation named (a one-line error for dtypes the Mosaic kernel refuses,
never XLA's dense fallback); rows outside the groups zeroed around a kernel that leaves them stale;
compute_dtype 'auto'. Needs no tokamax (a stand-in records what would be asked of it). The lowered
GPU program itself: tests/test_gpu_lowering.py (tokamax needed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import presets
from model.kernels import attention as attn
from model.kernels import backend, gmm
from model.params import init_params_unjitted


@pytest.fixture
def on_gpu(monkeypatch):
    """Our backend answers 'gpu' (what 'auto' resolves to and which tokamax kernel is named)."""
    monkeypatch.setattr(backend, "platform", lambda: "gpu")


def test_init_traces_the_reference_kernels_whatever_the_config_computes_with(on_gpu, monkeypatch):
    """Init reset the compute fields to their defaults ('auto', float32): on a GPU it traced
    tokamax attention in float32, which the Mosaic kernel refuses. Now it traces the blocked
    ones."""

    def refuse(*a, **k):
        raise AssertionError("init traced a tokamax kernel")

    monkeypatch.setattr(attn, "_tokamax", refuse)
    monkeypatch.setattr(gmm, "_tokamax", refuse)
    cfg = presets.get("tiny", moe_impl="auto", attention_impl="auto").replace(dtype="bfloat16")
    shapes = jax.eval_shape(lambda k: init_params_unjitted(cfg, k), jax.random.PRNGKey(0))
    assert shapes["embed"].dtype == jnp.float32  # params stay float32


class _RecordingTokamax:
    """Stands in for the tokamax module: records ragged_dot's implementation, computes with
    jax.lax.ragged_dot."""

    def __init__(self):
        self.implementations = []

    def ragged_dot(self, lhs, rhs, group_sizes, *, preferred_element_type, implementation=None):
        self.implementations.append(implementation)
        return jax.lax.ragged_dot(
            lhs, rhs, group_sizes, preferred_element_type=preferred_element_type
        )


@pytest.mark.parametrize(
    "platform,kernel", [("gpu", "mosaic_gpu"), ("tpu", "mosaic_tpu"), ("cpu", "xla")]
)
def test_grouped_gemm_names_the_kernel_of_its_backend(platform, kernel, monkeypatch):
    """Left to choose, tokamax falls back to XLA's dense ragged_dot whenever the Mosaic kernel
    declines; named, it raises instead."""
    fake = _RecordingTokamax()
    monkeypatch.setattr(backend, "platform", lambda: platform)
    monkeypatch.setattr(backend, "tokamax", lambda: fake)
    x, w = jnp.ones((8, 4), jnp.bfloat16), jnp.ones((2, 4, 3), jnp.bfloat16)
    y = gmm.grouped_matmul(x, w, jnp.array([3, 5], jnp.int32), impl="tokamax")
    assert fake.implementations == [kernel] and y.dtype == jnp.bfloat16


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("bfloat16", "float32")])
def test_grouped_gemm_on_gpu_refuses_what_the_mosaic_kernel_cannot_take(dtypes, on_gpu):
    x = jnp.ones((8, 4), dtypes[0])
    w = jnp.ones((2, 4, 3), dtypes[1])
    with pytest.raises(ValueError, match=f"got {dtypes[0]} x {dtypes[1]}; set compute_dtype") as e:
        gmm.grouped_matmul(x, w, jnp.array([3, 5], jnp.int32), impl="tokamax")
    assert "\n" not in str(e.value)


# --- rows outside the groups, through the kernel's own semantics ----------------------------------

TILE = 8  # rows per tile of the emulated kernel


@jax.custom_vjp
def _stale_kernel(lhs, rhs, group_sizes):
    return _stale_fwd(lhs, rhs, group_sizes)[0]


def _live(rows: int, group_sizes):
    return (jnp.arange(rows) < group_sizes.sum())[:, None]  # [R,1]


def _stale_fwd(lhs, rhs, group_sizes):
    out = jax.lax.ragged_dot(lhs, rhs, group_sizes)  # [R,N]
    return jnp.where(_live(lhs.shape[0], group_sizes), out, jnp.nan), (lhs, rhs, group_sizes)


def _stale_bwd(res, g):
    """d_lhs: rows past the groups unwritten (NaN). d_rhs: each group summed over whole tiles of
    rows from its start, rows outside the group masked in lhs only; g is read as it is."""
    lhs, rhs, group_sizes = res
    r = lhs.shape[0]
    d_lhs = jax.lax.ragged_dot(g, jnp.swapaxes(rhs, 1, 2), group_sizes)
    d_lhs = jnp.where(_live(r, group_sizes), d_lhs, jnp.nan)
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    rows = jnp.arange(r)[None]  # [1,R]
    in_group = (rows >= starts[:, None]) & (rows < ends[:, None])  # [E,R]
    in_tiles = (rows >= starts[:, None]) & (rows < (-(-ends // TILE) * TILE)[:, None])  # [E,R]
    lhs_masked = jnp.where(in_group[..., None], lhs[None], 0)  # [E,R,K]
    g_read = jnp.where(in_tiles[..., None], g[None], 0)  # [E,R,N]: NaN past the groups stays
    return d_lhs, jnp.einsum("ERK,ERN->EKN", lhs_masked, g_read), None


_stale_kernel.defvjp(_stale_fwd, _stale_bwd)


def test_padding_rows_put_no_nan_into_the_last_experts_weight_gradients(monkeypatch):
    """tokamax's sm90 grouped GEMM, emulated from its source: rows outside the groups keep stale
    memory (NaN here) in the output and in d_lhs, and the weight-gradient kernel masks them in one
    operand only. 10 rows in 2 groups, 6 padding rows (NaN inputs too), 8-row tiles: the second
    group's tile reads rows 10-15. Zeroing only h let NaN reach wi_gate/wi_up's last expert."""
    monkeypatch.setattr(gmm, "grouped_matmul", lambda a, w, s, impl: _stale_kernel(a, w, s))
    r, d, f = 16, 4, 3
    sizes = jnp.array([4, 6], jnp.int32)
    xs = jax.random.normal(jax.random.PRNGKey(0), (r, d)).at[10:].set(jnp.nan)
    ws = [
        jax.random.normal(jax.random.PRNGKey(i), s) * 0.5
        for i, s in enumerate([(2, d, f), (2, d, f), (2, f, d)], 1)
    ]
    probe = jax.random.normal(jax.random.PRNGKey(9), (r, d))
    loss = lambda fn, xs, *ws: jnp.sum(fn(xs, *ws) * probe)
    kernel = lambda xs, *ws: gmm.grouped_swiglu(xs, sizes, *ws, impl="tokamax")
    expert = np.repeat([0, 1, -1], [4, 6, 6])  # each row's expert; -1: padding

    def reference(xs, wi_gate, wi_up, wo):  # per row, its own expert's weights
        e = jnp.asarray(np.maximum(expert, 0))
        h = jax.nn.silu(jnp.einsum("RD,RDF->RF", xs, wi_gate[e])) * jnp.einsum(
            "RD,RDF->RF", xs, wi_up[e]
        )
        return jnp.where(jnp.asarray(expert >= 0)[:, None], jnp.einsum("RF,RFD->RD", h, wo[e]), 0)

    xs_clean = jnp.where(jnp.arange(r)[:, None] < 10, xs, 0)
    got = jax.grad(lambda *a: loss(kernel, *a), argnums=(0, 1, 2, 3))(xs, *ws)
    want = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2, 3))(xs_clean, *ws)
    for name, a, b in zip(("xs", "wi_gate", "wi_up", "wo"), got, want):
        assert np.isfinite(a).all(), f"{name}: {np.isnan(a).sum()} NaN"
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=name)
    y = kernel(xs, *ws)
    np.testing.assert_allclose(y, reference(xs_clean, *ws), rtol=1e-5, atol=1e-6)


# --- compute_dtype 'auto' -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "platform,want", [("cpu", "float32"), ("gpu", "bfloat16"), ("tpu", "bfloat16")]
)
def test_compute_dtype_auto_is_bfloat16_on_accelerators(platform, want, monkeypatch):
    """`python main.py` (configs/default.py: compute_dtype 'auto') on a GPU computes in bfloat16,
    the dtype the Mosaic kernels take; on CPU in float32 as before."""
    from configs import default
    from model.config import resolve_compute_dtype
    from train import model_config

    assert resolve_compute_dtype("auto", platform) == want
    assert resolve_compute_dtype("float32", platform) == "float32"
    monkeypatch.setattr(jax, "default_backend", lambda: platform)
    cfg, _ = model_config.model_config(default.get_config())
    assert cfg.dtype == want


def test_bad_compute_dtype_is_a_one_line_error():
    from model.config import resolve_compute_dtype

    with pytest.raises(ValueError, match="compute_dtype must be one of .*got 'fp16'"):
        resolve_compute_dtype("fp16", "gpu")
