"""Which implementation 'auto' means on this backend, and the one place tokamax is imported.

tokamax (the Pallas kernel library MaxText uses) needs Python >= 3.12 and JAX >= 0.11.1; it is an
optional dependency (`pip install '.[gpu]'` or `'.[tpu]'`). Where it is installed it is imported
with this module, before anything is traced: imported for the first time inside a trace it adds
to JAX's tracing context (its config values), so the jit cache key of the first call differs from
every later one's and `jit(train_step)` compiles twice (issue 53: 7.6 s + 7.7 s on CPU for the
tiny preset). Where it is not installed nothing here needs it unless a config names a tokamax
implementation (then `tokamax()` raises a one-line ImportError).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types

import jax

ACCELERATORS = ("gpu", "tpu")


def platform() -> str:
    """'cpu', 'gpu' or 'tpu': the backend the default device belongs to (CUDA and ROCm are
    'gpu')."""
    return jax.default_backend()


def _stub_xprof() -> None:
    """tokamax imports `xprof.cli.tools.get_kernel_stats_tool` at import time, only for its own
    profiling helpers. xprof is ~100 MB (too large to carry to a machine that cannot download), so
    where it is missing an empty module of that name stands in; nothing here calls it."""
    try:
        importlib.import_module("xprof.cli.tools")
        return
    except ImportError:
        pass
    names = ("xprof", "xprof.cli", "xprof.cli.tools", "xprof.cli.tools.get_kernel_stats_tool")
    for parent, name in zip((None,) + names, names):
        module = sys.modules.setdefault(name, types.ModuleType(name))
        if parent:
            setattr(sys.modules[parent], name.rsplit(".", 1)[1], module)


@functools.cache
def tokamax():
    """The tokamax module, or a one-line ImportError saying how to install it."""
    _stub_xprof()
    try:
        return importlib.import_module("tokamax")
    except ImportError as e:
        raise ImportError(
            f"tokamax is not importable ({e}); it needs Python >= 3.12 and JAX >= 0.11.1: "
            "pip install '.[gpu]' (CUDA) or '.[tpu]'"
        ) from None


def resolve(impl: str, cpu_default: str, accelerator_default: str) -> str:
    """'auto' -> the CPU or the accelerator default of this backend; any other name as given."""
    if impl != "auto":
        return impl
    return accelerator_default if platform() in ACCELERATORS else cpu_default


def _import_if_installed() -> None:
    """tokamax now, at import (module docstring: why); a broken install raises at first use."""
    if importlib.util.find_spec("tokamax") is None:
        return
    try:
        tokamax()
    except ImportError:
        pass


_import_if_installed()
