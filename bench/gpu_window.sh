#!/usr/bin/env bash
# The whole device window in one command (issue 53): install the carried wheels into a target
# folder, print the environment, run bench/bench_gpu.py in what is left of a total time limit, and
# leave everything under one output folder, whatever fails.
#
#   bash bench/gpu_wheels.sh               # here, first: fills .whl/ (carried to the device)
#   bash bench/gpu_window.sh "$OUT"        # on the device: run(carry [".whl"], timeout_s 600)
#   WINDOW_DRY_RUN=1 bash bench/gpu_window.sh DIR   # CPU: the same steps at --tiny (the test suite)
#
# Environment: WINDOW_S  total seconds (default 540: a 600-s command limit less start-up and copy);
#              BENCH_ARGS extra bench_gpu.py arguments (e.g. "--parts train,decode");
#              PYTHON    the interpreter (default python3); WHEELS the wheel folder (default .whl).
# Leaves in the folder: env.txt (date, GPU, versions), install.log, rows.jsonl (bench_gpu.py's rows,
# each appended as it is measured), bench.log (its printed lines and errors), status (its exit code).
# The wheels go to a folder outside it ($TMPDIR), so they are not copied back.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/gpu_window}}"
mkdir -p "$out"
python="${PYTHON:-python3}"
limit="${WINDOW_S:-540}"
start=$(date +%s)
left() { echo $((limit - ($(date +%s) - start))); }

site="${TMPDIR:-/tmp}/gpu_window_site"
wheels="${WHEELS:-.whl}"
if compgen -G "$wheels/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl \
    >"$out/install.log" 2>&1 || echo "warning: installing $wheels/ failed (install.log)" >&2
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "no $wheels/*.whl: running on what is installed" >"$out/install.log"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" # this checkout's model/, train/, bench/ first

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit: $(git rev-parse --short HEAD 2>/dev/null)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)  cpus: $(nproc)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
  else
    echo "nvidia-smi: none"
  fi
  "$python" --version
  "$python" -m pip list 2>/dev/null |
    grep -iE '^(jax|jaxlib|jax-cuda.*|flax|optax|orbax-checkpoint|tensorstore|tokamax|torch|transformers|ml.collections|grain|numpy) '
  echo "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-} XLA_FLAGS=${XLA_FLAGS:-}"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

args=(--jsonl "$out/rows.jsonl")
if [ -n "${WINDOW_DRY_RUN:-}" ]; then
  args+=(--tiny --repeats 1 --parts env,ceiling) # the steps, not the model: ~15 s
fi
budget=$(($(left) - 20)) # bench_gpu.py stops starting cases at its budget; 20 s to spare
# shellcheck disable=SC2086  # BENCH_ARGS is split into arguments on purpose
timeout -k 10 "$((budget + 10))" "$python" bench/bench_gpu.py --budget_s "$budget" "${args[@]}" \
  ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log"
echo "${PIPESTATUS[0]}" >"$out/status"
echo "gpu_window: $(($(date +%s) - start)) s; status $(cat "$out/status"); rows in $out/rows.jsonl"
