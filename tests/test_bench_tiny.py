"""Every model, training, decode and serving bench in bench/ at its smoke scale (`--tiny`: the tiny
preset, one or two steps, a few tokens; files only under /tmp), each in its own process as a user
runs it, so a broken import, a stale flag or a crash in a bench fails (issue 49, point 7). The
default run imports every bench script (one process); the tiny runs compile model programs and are
-m long (`compiles` below says why).
Each test also reads the bench's printed rows back and checks what a correct run must print:
finite numbers, and where the bench states an invariant (speculative greedy decode = plain greedy
decode; the cache bytes measured = the analytic count), that invariant. Numbers at this scale say
nothing about speed. The RL, environment and sandbox benches are in test_bench_tiny_rl.py;
bench_moe, bench_gpu, bench_memory_plan and load_serve have their own tests (test_bench_moe.py,
test_bench_gpu.py, test_memory_plan_grid.py, test_serve.py).

    python -m pytest -q -n 0 -m bench_tiny --durations=0 tests/test_bench_tiny*.py
"""

import math
import os
import re
import resource
import subprocess
import sys

import pytest
from bench_tiny_common import ENV, NUM, ROOT, log_cpu, run_tiny

pytestmark = pytest.mark.bench_tiny
# Every tiny run below compiles model programs in a fresh process: 40-90 s of CPU apiece, measured
# on the shared 2-core host at load ~20 with a cold compile cache (bench_context 54, bench_data 41,
# bench_decode 55, bench_a2a 43 with two meshes), so together they are far past the default run's
# share (~150 s). They run with -m long (or -m bench_tiny); the default run keeps
# test_every_bench_script_imports, which fails on a broken import in any bench.
compiles = pytest.mark.long


def num(text: str) -> float:
    return float(text.replace(",", ""))


def finite_positive(*values) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


IMPORT_ALL = """
import glob, os, runpy, sys
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "bench")]  # as `python bench/x.py` has it
for path in sorted(glob.glob("bench/*.py")):
    runpy.run_path(path, run_name="bench_import_check")  # the module body; main() does not run
    print("imported", path, flush=True)
"""


def test_every_bench_script_imports():
    """Every script in bench/ imports against today's tree, in one process (a bench whose tiny run
    is -m long is still checked here: bench_moe once failed at import and nothing ran it)."""
    t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # No hugepage re-exec (bench_model's and bench_rl_coding's import does it: the loop would
    # start over in the re-executed process).
    env = dict(ENV, COMPOSER_JAX_HUGEPAGES="0")
    p = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    log_cpu("import every bench", t0)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    scripts = sorted(f for f in os.listdir(os.path.join(ROOT, "bench")) if f.endswith(".py"))
    assert p.stdout.split() == [w for f in scripts for w in ("imported", f"bench/{f}")]


@compiles
def test_a2a_times_every_dispatch():
    out = run_tiny("bench_a2a.py")  # 8 simulated devices: the bench adds them to XLA_FLAGS
    meshes = re.findall(r"mesh \(data, fsdp, expert, tensor\) = \((.*?)\), 64 tokens", out)
    assert meshes == ["1, 2, 2, 2"], out  # --tiny: one mesh, every axis but data over 2 devices
    rows = re.findall(
        rf"^  (gspmd \(blocked\)|alltoall \S+(?: \S+)?) +{NUM} ms  x *{NUM}", out, re.M
    )
    assert len(rows) == 3, out
    assert all(finite_positive(num(ms)) for _, ms, _ in rows), rows
    assert [num(x) for name, _, x in rows if name.startswith("gspmd")] == [1.0]


@compiles
def test_context_axis_step_on_two_devices():
    out = run_tiny("bench_context.py")
    row = re.search(rf"^\| context 2 \(\{{'data': 1, .*'context': 2\}}\) \| {NUM} \| 1.00x \|$",
                    out, re.M)  # fmt: skip
    assert row and finite_positive(num(row.group(1))), out


@compiles
def test_data_pipeline_rows_and_the_restore():
    out = run_tiny("bench_data.py")
    rows = re.findall(rf"^\| (.+?) \| .*? \| {NUM} \| {NUM}x \|$", out, re.M)
    names = [r[0] for r in rows]
    assert len(rows) == 7 and names[0].startswith("raw read") and "SFT traces" in names[5], out
    assert all(finite_positive(num(r[1]), num(r[2])) for r in rows), rows
    assert re.search(r"^tiny preset training: [\d,]+ tokens/s", out, re.M), out
    assert re.search(rf"restore mid-epoch \(after 2 batches\) and fetch one batch: {NUM} s", out)


@compiles
def test_decode_speculative_greedy_equals_plain_and_cache_bytes_match():
    out = run_tiny("bench_decode.py")
    rows = re.findall(r"^\| 1 \| auto \| 0 \| (\d) \| ([\d.]+) \| .*\| (\S+) \|$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1"], out
    assert all(finite_positive(float(r[1])) for r in rows), rows
    assert rows[1][2] == "True", out  # greedy with 1 MTP draft decodes the same tokens as K=0
    for measured, analytic in re.findall(r"tiny \w+: (\d+) bytes/token measured .*= (\d+) by", out):
        assert measured == analytic, out
    assert out.count("bytes/token measured") == 2, out


@compiles
def test_engine_decode_times_decode_and_prefill():
    out = run_tiny("bench_engine_decode.py")
    want = [
        "decode iteration, 2 slots",
        "decode iteration, 8 slots at context 64 (turns <= 192)",
        "8-token prefill + 1 decode at context 64",
    ]
    for what in want:
        row = re.search(rf"^\| this tree \| {re.escape(what)} \| {NUM} \|$", out, re.M)
        assert row and finite_positive(num(row.group(1))), (what, out)


@compiles
def test_model_train_step_mfu_and_cache_ratios():
    out = run_tiny("bench_model.py")
    step = re.search(rf"moe_impl=blocked +step +{NUM} ms +{NUM} tokens/s +MFU {NUM}%", out)
    assert step and finite_positive(*(num(g) for g in step.groups())), out
    assert "compile time vs depth" not in out  # --tiny skips the 4 vs 32 layer compiles
    ratios = re.findall(rf"(kimi_k2|deepseek_v3): latent .* \({NUM}x smaller\)", out)
    assert len(ratios) == 2 and all(num(r) > 1 for _, r in ratios), out


@compiles
def test_train_throughput_over_three_meshes():
    out = run_tiny("bench_train.py")
    rows = re.findall(rf"^\| (\d) \| (\S+) \| 2 x 16 \| {NUM} \| {NUM} \|", out, re.M)
    assert [(d, m) for d, m, _, _ in rows] == [("1", "data=1"), ("2", "data=2"), ("2", "fsdp=2")]
    assert all(finite_positive(num(s), num(t)) for _, _, s, t in rows), out


@compiles
def test_vs_pytorch_mfu_part_and_the_torch_parts_or_their_skip():
    out = run_tiny("bench_vs_pytorch.py")
    mfu = re.search(rf"tiny preset train step B=2 T=32: .* = {NUM} GFLOP/s", out)
    ratio = re.search(rf"MFU vs 256\^3 peak {NUM} GFLOP/s: {NUM};", out)
    assert mfu and ratio and finite_positive(num(mfu.group(1)), num(ratio.group(2))), out
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        assert "skipping ['train', 'decode']: torch/transformers not installed" in out
    else:
        assert "train step B=1 T=16" in out and "greedy decode, prompt 4 + 2" in out, out


@compiles
def test_serve_answers_every_request():
    out = run_tiny("bench_serve.py")
    row = re.search(rf"c= 1 server +{NUM} req/s +{NUM} tok/s .* (\d+)/2 done", out)
    assert row and finite_positive(num(row.group(1))) and row.group(3) == "2", out


@compiles
def test_weight_sync_round_trips_a_version_and_swaps_once():
    out = run_tiny("bench_weight_sync.py")  # each fetch is checked bitwise inside the bench
    delta = re.search(rf"^\| 1e-05 \| local \| bfloat16 \| 1 \| ([\d,]+) \| {NUM} \| {NUM} \|",
                      out, re.M)  # fmt: skip
    assert delta and num(delta.group(1)) > 0 and 0 < num(delta.group(3)) <= 1, out
    swaps = re.findall(r"^\| (prefetch|poll downloads) \| 1 \|", out, re.M)
    assert swaps == ["prefetch", "poll downloads"], out


@compiles
def test_stages_chain_three_stages():
    """Long (five main.py processes, each importing JAX and compiling: ~2 min of CPU at this
    scale); the stage chain itself is in the default run through tests/test_stages.py."""
    out = run_tiny(
        "bench_stages.py",
    )
    rows = re.findall(rf"^\| \((a|b|c)\) .*? \| {NUM} \| {NUM} \| {NUM} \| {NUM} \|$", out, re.M)
    assert [r[0] for r in rows] == ["a", "b", "c"], out
    assert all(finite_positive(*(num(x) for x in r[1:])) for r in rows), rows


@compiles
def test_compile_the_suites_flags_compile_the_grad_cheaper():
    """bench_compile's tiny run: the tiny preset's grad compiled cold in fresh processes, twice
    each in turn, with XLA's defaults and with the suite's flags (tests/xla_env.py); the suite's
    must cost less CPU on average (0.16x on JAX 0.10 at load ~1.4, 2026-11-29), else its reason
    to exist is gone."""
    out = run_tiny("bench_compile.py", "--repeats", "2")
    rows = dict(re.findall(rf"^(xla defaults|suite) +grad compile {NUM}x", out, re.M))
    assert set(rows) == {"xla defaults", "suite"}, out
    assert float(rows["xla defaults"]) == 1.0, out
    means = dict(
        re.findall(rf"^(xla defaults|suite) +compiles: mean {NUM} s of CPU over 2 runs", out, re.M)
    )
    assert set(means) == {"xla defaults", "suite"}, out
    assert num(means["suite"]) < 0.9 * num(means["xla defaults"]), out
