"""bench/bench_gpu.py and bench/gpu_window.sh on CPU: every part but transformers' (torch is not a
test dependency) produces its numbers at the smoke scale (--tiny, in one process); the runner keeps
what was measured through a failing case and a time-out, never imports JAX itself, and reads an
out-of-memory as one; the window script's dry run leaves its folder; and the HBM roofline's byte
count against a hand count. ~60 s on 2 cores at load ~9 (the in-process smoke run is most of it)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from xla_env import xla_flags

from bench import bench_gpu
from model import count_params, presets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# one CPU device, as one GPU (with the suite's cheap compiles: XLA's defaults took 72 s of CPU
# for this bench's tiny run, these 29)
ENV = dict(os.environ, XLA_FLAGS=xla_flags(), PYTHONPATH=ROOT)


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tiny_run_reports_every_part(tmp_path):
    out = tmp_path / "rows.jsonl"
    cmd = [sys.executable, "bench/bench_gpu.py", "--tiny", "--in_process", "--repeats", "1"]
    cmd += ["--jsonl", str(out)]
    cmd += ["--parts", "ceiling,kernels,train,decode,memory", "--variants", "blocked:blocked"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=ENV)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = _rows(out)
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


def test_measured_rows_survive_a_failing_case_and_a_time_out(tmp_path):
    """Planted cases, each in its own process: one measures a row and then raises, one hangs past
    its 5-s limit; the row measured before the failure is kept, each failure is a row, and the
    case after them still runs. The parent process never imports JAX (so it holds no device)."""
    out = tmp_path / "rows.jsonl"
    script = textwrap.dedent(f"""
        import sys
        from bench import bench_gpu
        bench_gpu.main(["--tiny", "--parts", "_fail,_hang,ceiling", "--part_s", "_hang=5",
                        "--repeats", "1", "--jsonl", {str(out)!r}])
        print("parent imported jax:", "jax" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "parent imported jax: False" in p.stdout
    rows = _rows(out)
    assert [r["part"] for r in rows] == ["run", "_fail", "_fail", "_hang", "ceiling", "end"]
    assert rows[1] == {"part": "_fail", "measured": 1}  # printed before the raise: kept
    assert rows[2]["error"] == "RuntimeError: planted failure" and rows[2]["oom"] is False
    assert rows[3]["timeout"] is True and "timed out after 5 s" in rows[3]["error"]
    assert rows[4]["tflops"] > 0
    assert p.stdout.count("  _fail") == 2  # each row printed as it came, too


def test_an_out_of_memory_is_recorded_as_one():
    stderr = (
        "Traceback (most recent call last):\n  ...\njaxlib.xla_extension.XlaRuntimeError: "
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 142.00GiB.\n"
    )
    row = bench_gpu.error_row("train", "train", "ragged:tokamax", stderr, 1)
    assert row["oom"] is True and row["error"].startswith("jaxlib.xla_extension.XlaRuntimeError")


def test_defaults_run_the_train_step_first_and_leave_out_known_failures():
    plan = bench_gpu.plan(bench_gpu.parse([]))
    assert plan[0][0] == "env" and plan[1] == ("train", "train", "tokamax:tokamax")
    assert plan[-1][0] == "kernels"  # the standalone kernels (cuDNN, ragged_dot's fallback) last
    assert "ragged:tokamax" not in bench_gpu.DEFAULT_VARIANTS  # ragged_dot's fallback: OOM


def test_cases_may_take_the_gpu_but_never_set_both_memory_fractions(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.delenv("XLA_CLIENT_MEM_FRACTION", raising=False)
    assert bench_gpu.child_env()["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.95"
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", "0.9")  # jaxlib raises when both are set
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in bench_gpu.child_env()


def test_window_script_dry_run_leaves_everything_in_its_folder(tmp_path):
    # No wheels here (.whl/ holds Python 3.12 wheels for the GPU image, when gpu_wheels.sh ran).
    env = dict(ENV, WINDOW_DRY_RUN="1", PYTHON=sys.executable, WINDOW_S="200", WHEELS=str(tmp_path))
    p = subprocess.run(["bash", "bench/gpu_window.sh", str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "status").read_text().strip() == "0"
    assert "date:" in (tmp_path / "env.txt").read_text()
    assert "running on what is installed" in (tmp_path / "install.log").read_text()
    rows = _rows(tmp_path / "rows.jsonl")
    assert [r["part"] for r in rows] == ["run", "env", "ceiling", "end"]
    assert rows[0]["budget_s"] <= 200 - 20 and rows[1]["platform"] == "cpu"
    assert "  ceiling" in (tmp_path / "bench.log").read_text()


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
