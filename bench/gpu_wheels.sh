#!/usr/bin/env bash
# Wheels a GPU image (Python 3.12, JAX 0.11, flax/optax/orbax/tensorstore, torch + transformers)
# lacks for bench/bench_gpu.py, downloaded here into .whl/ (git-ignored) for a machine that cannot
# download: tokamax and its pure-Python needs (xprof, ~100 MB, is stubbed: model/kernels/backend.py),
# grain, tensorboardX. Versions are those `pip install -e '.[kernels]'` resolves on Python 3.12.
# On the GPU machine: python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   && PYTHONPATH=/tmp/site python3 bench/bench_gpu.py
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  tokamax==0.0.17 qwix==0.1.8 einshape==1.0 immutabledict==4.3.1 \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 tensorboardX==2.6.5
du -sh .whl
