"""Kernels by backend, one interface: the model calls one function per hot op and the backend picks
the implementation (docs/architecture.md, "Kernels by backend").

    attention.train_attention  training attention, packed rows  blocked einsums | tokamax flash
    gmm.grouped_matmul         expert matmuls, grouped rows     tokamax GMM | ragged_dot

`choice.py` is where a configured name ('auto' or explicit) becomes the implementation that runs:
attention's, the MoE's dispatch and the MoE's communication. The MoE's CPU path, the blocked loop,
is not a grouped matmul: it is `model.moe.dispatch_blocked`, which `model.moe.dispatch_for` runs
when the choice is 'blocked'.

On CPU the plain XLA code runs (what every test checks the kernels against); on GPU/TPU the
maintained Pallas kernels of `tokamax` run (Mosaic GPU on Hopper, Pallas TPU), installed by the
`.[gpu]` / `.[tpu]` extras. `backend.py` resolves 'auto' and imports tokamax.
"""
