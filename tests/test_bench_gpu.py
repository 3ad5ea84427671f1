"""bench/bench_gpu.py at its CPU smoke scale (--tiny): every part but transformers' (torch is not a
test dependency) produces its numbers (in one process: on the GPU each case gets its own, for its
memory peak); and the HBM roofline's byte count against a hand count. About 30 s on 2 cores."""

import json
import os
import subprocess
import sys

import pytest

from bench import bench_gpu
from model import count_params, presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tiny_run_reports_every_part(tmp_path):
    out = tmp_path / "rows.json"
    cmd = [sys.executable, "bench/bench_gpu.py", "--tiny", "--in_process", "--repeats", "1"]
    cmd += ["--json", str(out)]
    cmd += ["--parts", "ceiling,kernels,train,decode,memory", "--variants", "blocked:blocked"]
    env = dict(os.environ, XLA_FLAGS="")  # one CPU device, as one GPU (conftest simulates 8)
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert not [r for r in rows if "error" in r or "skipped" in r], rows
    by_part = {}
    for r in rows:
        by_part.setdefault(r["part"], []).append(r)
    assert by_part["ceiling"][0]["tflops"] > 0
    assert {(r["impl"], r["pass"]) for r in by_part["gmm"]} == {
        ("ragged", "fwd"),
        ("ragged", "fwd+bwd"),
    }
    assert all(r["tflops"] > 0 for r in by_part["gmm"] + by_part["attention"])
    (train,) = by_part["train"]
    assert train["tokens_per_s"] == pytest.approx(2 * 64 / (train["ms"] / 1e3))
    assert 0 < train["mfu"] <= 1 and "matmul" in train["peak"]  # CPU: the measured peak
    (memory,) = by_part["memory"]
    assert train["peak_memory_gib"] == pytest.approx(memory["total_gib"])  # CPU: the plan
    (decode,) = by_part["decode"]
    assert decode["batch"] == 4 and decode["tokens_per_s"] > 0


def test_decode_bytes_count_every_weight_an_expert_choice_can_touch():
    cfg = presets.get("mid")
    total, _ = count_params(cfg)
    expert = 3 * 2048 * 1024
    # batch 1: 8 of 32 experts chosen -> 24 unused per MoE layer (7 layers); embedding rows unread
    want_weights = total - 32768 * 2048 - 7 * 24 * expert
    cache = 1 * 300 * 8 * (512 + 64)
    assert bench_gpu.decode_bytes_per_step(cfg, 1, 300) == pytest.approx(2 * (want_weights + cache))
    # batch 64: (3/4)^64 of an expert unused -> every expert read
    big = bench_gpu.decode_bytes_per_step(cfg, 64, 300)
    assert big == pytest.approx(2 * (total - 32768 * 2048 + 64 * 300 * 8 * 576), rel=1e-6)
