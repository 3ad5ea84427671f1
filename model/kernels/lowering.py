"""What a GPU or TPU will run, read on a machine without one: lower for the target, count kernels.

`jax.export(fn, platforms=['cuda'])` lowers a program to StableHLO for a platform this machine
lacks: nothing is compiled or run. Two questions decide which kernels end up in it, and both are
asked of this machine, so `emulate(target)` makes them answer as the target for its duration:
  - ours: `backend.platform()` (model/kernels/backend.py), which resolves 'auto' implementations
    and names tokamax's kernel per backend;
  - tokamax's: `jax.extend.backend.get_default_device()`, whose platform, compute capability,
    device_kind and core count pick the Mosaic GPU kernel generation (sm90 for an H100/H200),
    its autotuning entries and its launch grid; and tokamax's `cross_compile` flag, which lets a
    kernel pass its "is the hardware here" check.

`kernel_counts(text)` reads the lowered module: Mosaic GPU kernels (custom_call @mosaic_gpu_v2),
Pallas TPU kernels (@tpu_custom_call), Triton kernels, cuDNN calls, and XLA's ragged_dot (a
`chlo.ragged_dot` composite: on GPU its dense fallback). `score_tensors(text, ...)` lists the
tensor types shaped like materialized attention scores [B, H, t, S].

Used by tests/test_gpu_lowering.py and bench/bench_gpu.py --parts lowering.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import re

import jax

from model.kernels import backend


@dataclasses.dataclass(frozen=True)
class Device:
    """What tokamax reads of the default device (hashable: tokamax puts devices in a set)."""

    platform: str
    device_kind: str
    compute_capability: str | None = None
    core_count: int = 1
    id: int = 0


TARGETS = {
    # H100/H200: compute capability 9.0 (sm90), 132 SMs.
    "h200": ("cuda", "gpu", Device("gpu", "NVIDIA H200", "9.0", 132)),
    "tpu": ("tpu", "tpu", Device("tpu", "TPU v5p", None, 1)),
}

# Markers in the lowered text, counted per kernel kind.
MARKERS = {
    "mosaic_gpu": r"custom_call @mosaic_gpu(?:_v2)?\b",
    "pallas_tpu": r"custom_call @tpu_custom_call\b",
    "triton": r"custom_call @__gpu\$xla\.gpu\.triton\b",
    "cudnn": r"custom_call @__cudnn\$",
    "ragged_dot": r"composite \"chlo\.ragged_dot\"",
}


@contextlib.contextmanager
def emulate(target: str):
    """Inside: our backend reports the target's platform, tokamax's device query the target's
    device, and tokamax's hardware checks are off (its documented cross-compile flag)."""
    _, platform, device = TARGETS[target]
    from jax.extend import backend as jax_backend

    backend.tokamax()  # first: it stubs xprof where missing, which tokamax imports
    tokamax_config = importlib.import_module("tokamax.config")
    saved = (backend.platform, jax_backend.get_default_device)
    backend.platform = lambda: platform
    jax_backend.get_default_device = lambda: device
    try:
        with tokamax_config.cross_compile(True):
            yield
    finally:
        backend.platform, jax_backend.get_default_device = saved


def _abstract_mesh(target: str):
    """Pallas TPU and Pallas Triton read the chip from the abstract mesh's device when there is
    none here (jax._src.tpu_info; pallas/triton): a one-device abstract mesh of the target's kind,
    entered by export_text around the export only (eager ops refuse to run under it) and only
    outside a mesh. Under a concrete mesh of this machine's devices (the trainer's) they read
    'cpu' and refuse (Mosaic GPU does not ask): so only programs lowered outside a mesh get TPU
    kernels here."""
    from jax._src.mesh import AbstractDevice  # not exported by jax.sharding in 0.11

    device = TARGETS[target][2]
    cores = 2 if device.platform == "tpu" else device.core_count  # v5p: 2 TensorCores per chip
    abstract = AbstractDevice(
        device_kind=device.device_kind, num_cores=cores, platform=device.platform
    )
    return jax.sharding.use_abstract_mesh(
        jax.sharding.AbstractMesh(
            (1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,), abstract_device=abstract
        )
    )


def export_text(fn, *args, target: str) -> str:
    """fn (jitted or not) lowered for `target` at args (arrays or ShapeDtypeStructs): its
    StableHLO text. Call it inside `emulate(target)` so the kernels are the target's."""
    fn = fn if hasattr(fn, "trace") else jax.jit(fn)
    # Triton calls are not on export's list of stable custom calls; lowered anyway, so that a
    # fallback to them is counted rather than raised.
    triton = jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
    export = jax.export.export(fn, platforms=[TARGETS[target][0]], disabled_checks=[triton])
    outside_a_mesh = jax.sharding.get_abstract_mesh().empty
    with _abstract_mesh(target) if outside_a_mesh else contextlib.nullcontext():
        return export(*args).mlir_module()


def kernel_counts(text: str) -> dict:
    """{kernel kind: calls in the lowered text} for every kind in MARKERS."""
    return {name: len(re.findall(pattern, text)) for name, pattern in MARKERS.items()}


def kernel_operands(text: str, kind: str = "mosaic_gpu") -> list[list[str]]:
    """The operand tensor types of every `kind` call, e.g. ['131072x2048xbf16', '32x2048x1024xbf16',
    '2079xi32', ...] for a grouped GEMM: what shapes and element types the kernel runs at."""
    calls = []
    for line in text.splitlines():
        if re.search(MARKERS[kind], line):
            signature = line.rsplit(" : (", 1)[-1].split(") -> ", 1)[0]
            calls.append(re.findall(r"tensor<([^>]+)>", signature))
    return calls


def score_tensors(text: str, batch: int, heads: int, queries: tuple, keys: int) -> list[str]:
    """Tensor types shaped like attention scores [B, H, t, S]: `batch` and `heads` among the
    leading dims, the last two (t, keys) with t in `queries` (the full query length and any query
    block). Params never match: none has the batch dim (e.g. mid's wo [7, 16, 128, 2048])."""
    found = set()
    for shape in re.findall(r"tensor<((?:\d+x){3,}\w+)>", text):
        dims = [int(d) for d in shape.split("x")[:-1]]
        lead = dims[:-2]
        if dims[-1] == keys and dims[-2] in queries and batch in lead and heads in lead:
            found.add(shape)
    return sorted(found)
