#!/usr/bin/env bash
# Wheels a GPU image (Python 3.12, JAX 0.11.2 + CUDA 13, flax/optax/orbax/tensorstore, torch +
# transformers) lacks, downloaded here into .whl/ (git-ignored) for a machine that cannot download:
#   - tokamax and its pure-Python needs (xprof, ~100 MB, is stubbed: model/kernels/backend.py);
#     jaxtyping + wadler-lindig and tqdm in case the image lacks them;
#   - what `python main.py` imports beyond the image: ml-collections (its configs), grain with
#     array-record, portpicker and cloudpickle (the data pipeline), tensorboardX.
# Versions are those `pip install -e '.[kernels]'` resolves on Python 3.12.
# On the GPU machine bench/gpu_window.sh installs them (pip --no-index --no-deps --target).
set -euo pipefail
cd "$(dirname "$0")/.."
exclude="$(git rev-parse --git-path info/exclude)" # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  tokamax==0.0.17 qwix==0.1.8 einshape==1.0 immutabledict==4.3.1 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  jaxtyping==0.3.11 wadler-lindig==0.1.8 tqdm==4.70.1 \
  ml-collections==1.1.0 \
  grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 cloudpickle==3.1.3 tensorboardX==2.6.5
du -sh .whl
