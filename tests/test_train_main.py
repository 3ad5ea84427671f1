"""main.py as a user runs it: one-line config errors before compiling, and --dry_run on kimi_k2."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _main(*args, timeout=120):
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu"
    )
    return subprocess.run(
        [sys.executable, "main.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--config.train.stepz=3"], 'Did you mean "steps"'),
        (["--config.train.steps=abc"], "--config.train.steps=abc"),
        (["--config=configs/nope.py"], "cannot load config file configs/nope.py"),
        (["--config.mesh.tensor=3"], "fixed axes (3) do not divide 8 devices"),
        (
            ["--config.model=tiny", "--config.mesh.data=1", "--config.mesh.tensor=8"],
            "num_attention_heads=4 is not divisible by mesh.tensor=8",
        ),
        (["--config.model=huge"], "unknown model preset 'huge'"),
        (["--config.train.optimizer=sgd"], "train.optimizer='sgd'"),
    ],
)
def test_config_errors_are_one_line_before_compiling(args, expected, tmp_path):
    out = _main(*args, f"--workdir={tmp_path}")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [l for l in out.stderr.splitlines() if l.startswith("config error:")]
    assert len(lines) == 1 and expected in lines[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert not os.path.exists(tmp_path / "checkpoints")


def test_dry_run_kimi_k2_on_described_256_device_mesh():
    out = _main("--config=configs/kimi_k2.py", "--dry_run")
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "1,026,408,232,448 params total" in text
    assert "on 256 devices" in text and "'expert': 16" in text
    gib = float(text.split("per device: params ")[1].split(" GiB")[0])
    # 1.026e12 float32 params over 256 chips is 14.9 GiB at best; replicated leftovers stay small.
    assert 14.9 < gib < 20.0, text
