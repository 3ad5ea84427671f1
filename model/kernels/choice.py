"""Which kernel runs: the one place a configured name ('auto' or explicit) becomes the
implementation the model runs, for attention and for the MoE (its dispatch and its communication).

    attention_impl('auto')        'blocked' on CPU, 'tokamax' on GPU/TPU
    moe_impl('auto')              'blocked' on CPU, 'tokamax' on GPU/TPU
    moe_comm('auto', devices)     'alltoall' on a multi-device GPU/TPU mesh, else 'gspmd'

An explicit name stays as given (configs validate names: model/config.py). `backend.py` says which
backend this is; `model/moe.py` and `model/kernels/attention.py` ask here and nowhere else.
"""

from __future__ import annotations

from typing import NamedTuple

from model.kernels import backend


def attention_impl(name: str) -> str:
    """ModelConfig.attention_impl -> 'blocked' | 'tokamax' | 'cudnn' | 'opaque'."""
    return backend.resolve(name, "blocked", "tokamax")


def moe_impl(name: str) -> str:
    """ModelConfig.moe_impl -> 'blocked' | 'dense' | 'tokamax' | 'ragged' | 'opaque'."""
    return backend.resolve(name, "blocked", "tokamax")


def moe_comm(name: str, mesh_devices: int) -> str:
    """ModelConfig.moe_comm -> 'gspmd' | 'alltoall'. 'auto': 'alltoall' on GPU/TPU under a mesh of
    more than one device (the grouped-GEMM kernel is a custom call GSPMD would run unpartitioned,
    whole on every device), else 'gspmd' (CPU; one device, where there is nothing to exchange)."""
    if name == "auto" and mesh_devices <= 1:
        return "gspmd"
    return backend.resolve(name, "gspmd", "alltoall")


class MoEChoice(NamedTuple):
    impl: str  # the expert computation: moe_impl()
    comm: str  # how tokens reach their experts: moe_comm()
    block: int  # the blocked dispatch's rows per block (0: sized from the assignments)


def moe(cfg, mesh_devices: int) -> MoEChoice:
    """A ModelConfig's MoE kernel choice on this backend under a mesh of `mesh_devices`."""
    return MoEChoice(
        moe_impl(cfg.moe_impl), moe_comm(cfg.moe_comm, mesh_devices), cfg.moe_block_size
    )
