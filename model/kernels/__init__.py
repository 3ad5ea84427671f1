"""Kernels by backend, one interface: the model calls one function per hot op and the backend picks
the implementation (docs/architecture.md, "Kernels by backend").

    attention.train_attention   training attention over packed rows   blocked einsums | tokamax flash
    gmm.grouped_matmul          expert matmuls over grouped rows       tokamax GMM | ragged_dot

The MoE's CPU path, the blocked loop, is not a grouped matmul: it is `model.moe.dispatch_blocked`,
and `model.moe.select_dispatch` chooses between it and the grouped matmul by `moe_impl`.

On CPU the plain XLA code runs (what every test checks the kernels against); on GPU/TPU the
maintained Pallas kernels of `tokamax` run (Mosaic GPU on Hopper, Pallas TPU), installed by the
`.[gpu]` / `.[tpu]` extras. `backend.py` resolves 'auto' and imports tokamax.
"""
