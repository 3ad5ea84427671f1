"""Kernels by backend, one interface: the model calls one function per hot op and the backend picks
the implementation (DESIGN.md, "Kernels by backend").

    attention.train_attention   training attention over packed rows   blocked einsums | tokamax flash
    gmm.grouped_matmul          expert matmuls over grouped rows       blocked loop | tokamax GMM

On CPU the plain XLA code runs (what every test checks the kernels against); on GPU/TPU the
maintained Pallas kernels of `tokamax` run (Mosaic GPU on Hopper, Pallas TPU), installed by the
`.[gpu]` / `.[tpu]` extras. `backend.py` resolves 'auto' and imports tokamax.
"""
