"""main.py as a user runs it: one-line errors (config, missing checkpoint, data, params dirs, HF
folder) with a nonzero exit before compiling, and --dry_run on kimi_k2."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from xla_env import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _main(*args, timeout=120):
    env = dict(os.environ, XLA_FLAGS=xla_flags(8), JAX_PLATFORMS="cpu")
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
        (["--config=README.md"], "--config=README.md is not a config file"),  # not Python
        (["--config=rl/episodes/passk.py"], "defines no get_config()"),  # Python, but not a config
        (["--config.mesh.tensor=3"], "fixed axes (3) do not divide 8 devices"),
        (
            ["--config.model=tiny", "--config.mesh.data=1", "--config.mesh.tensor=8"],
            "num_attention_heads=4 is not divisible by mesh.tensor=8",
        ),
        (["--config.model=huge"], "unknown model preset 'huge'"),
        (["--config.train.optimizer=sgd"], "train.optimizer='sgd'"),
        (
            [
                "--config.model=tiny",
                "--config.eval_gate.keep=1",
                "--config.eval_gate.metric=pass@1",
            ],
            "eval_gate.metric='pass@1' is not reported by this run",
        ),
    ],
)
def test_config_errors_are_one_line_before_compiling(args, expected, tmp_path):
    out = _main(*args, f"--workdir={tmp_path}")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [l for l in out.stderr.splitlines() if l.startswith("config error:")]
    assert len(lines) == 1 and expected in lines[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert not os.path.exists(tmp_path / "checkpoints")


def _bad_inputs(tmp_path):
    """(args, expected line) for each missing or malformed input a user can name."""
    empty = tmp_path / "empty_workdir"
    empty.mkdir()
    hf = tmp_path / "hf_missing_fields"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "deepseek_v3"}')
    cfg = tmp_path / "missing_data.py"
    cfg.write_text(
        "from configs import default\n\n\ndef get_config():\n    c = default.get_config()\n"
        "    c.model = 'tiny'\n"
        f"    c.data.sources = ({{'kind': 'jsonl', 'paths': ['{tmp_path}/nope/*.jsonl']}},)\n"
        "    return c\n"
    )
    hf_no_weights = tmp_path / "hf_no_weights"  # a complete config.json, no *.safetensors
    hf_no_weights.mkdir()
    with open(os.path.join(ROOT, "tests", "fixtures", "hf", "mtp", "config.json")) as f:
        fields = json.load(f)
    fields.update(vocab_size=512, max_position_embeddings=128)  # fits the default data settings
    (hf_no_weights / "config.json").write_text(json.dumps(fields))
    tiny = "--config.model=tiny"
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    return [
        ([tiny, f"--workdir={a_file}"], f"--workdir={a_file} is a file; it must name a directory"),
        (["--mode=sample", "--prompt=x", tiny, f"--workdir={empty}"], "error: --workdir="),
        (["--mode=convert", tiny, f"--workdir={empty}"], "no checkpoint under"),
        (["--mode=sample", "--prompt=x", f"--params={tmp_path}/nope"], f"--params={tmp_path}/nope"),
        ([f"--config={cfg}", f"--workdir={empty}"], "nope/*.jsonl"),
        (
            [tiny, f"--config.init_params_from={tmp_path}/nope", f"--workdir={empty}"],
            "not a params",
        ),
        ([f"--config.model={hf}", f"--workdir={empty}"], f"config error: model='{hf}'"),
        ([f"--config.model={hf_no_weights}", f"--workdir={empty}"], "no *.safetensors files"),
        (
            ["--mode=rollout", "--config=configs/rollout.py", f"--params={tmp_path}/nope"],
            f"--params={tmp_path}/nope",
        ),
        (["--mode=rollout", f"--params={tmp_path}/nope"], "needs --config=configs/rollout.py"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_bad_inputs_are_one_line_with_nonzero_exit(case, tmp_path):
    args, expected = _bad_inputs(tmp_path)[case]
    out = _main(*args)
    assert out.returncode == 2, out.stdout + out.stderr[-3000:]
    lines = [l for l in out.stderr.splitlines() if "error: " in l]
    assert len(lines) == 1 and expected in lines[0], out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]


def test_dry_run_kimi_k2_on_described_256_device_mesh():
    out = _main("--config=configs/kimi_k2.py", "--dry_run")
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "1,026,408,232,448 params total" in text
    assert "on 256 devices" in text and "'expert': 8" in text
    gib = float(text.split("per device: params ")[1].split(" GiB")[0])
    # 1.026e12 float32 params over 256 chips is 14.9 GiB at best; replicated leftovers stay small.
    assert 14.9 < gib < 20.0, text
    # The shipped config fits the slice it names (256 x H200), as planned for its own mesh, the
    # gradient accumulation included (column 8: memory_plan.accumulation_bytes, above a gradient).
    h200 = [ln for ln in text.splitlines() if ln.startswith("| this run: 256 x H200-141GB")]
    cells = h200[0].split(" | ")
    assert len(h200) == 1 and float(cells[8]) > float(cells[6]), text[:3000]
    assert cells[14] == "yes", text[:3000]


def test_rl_dry_run_prints_the_trainer_and_the_sampler_meshes():
    out = _main("--mode=rl", "--config=configs/rl_kimi_k2.py", "--dry_run")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any(ln.startswith("| this run: v5p-512") and "| 32k |" in ln for ln in lines)
    sampler = [ln for ln in lines if ln.startswith("sampler mesh")]
    assert len(sampler) == 1 and "on 64 devices" in sampler[0] and "68.6 KiB" in sampler[0]
    assert [ln.split(":")[0] for ln in lines if ln.startswith("  ")] == [
        "  32k tokens",
        "  256k tokens",
    ]
    assert any(ln.startswith("weight push per version per trainer host (64 hosts)") for ln in lines)


def test_sample_cli_completes_a_prompt_from_an_export(tmp_path, tiny_model):
    """--mode=sample's body (eval/sample.py): byte-tokenized prompt after <|bos|>, greedy, stops
    at eos, never samples the model's padded ids (tiny's vocab 320 > the tokenizer's 272)."""
    from data.tokenizers import ByteTokenizer
    from eval.sample import sample_cli
    from model import generate
    from model.export import save_params

    cfg, params = tiny_model
    save_params(str(tmp_path), cfg, params)
    text = sample_cli(str(tmp_path), "def f(", max_new_tokens=6)
    tok = ByteTokenizer()
    want = generate(
        cfg,
        params,
        [[tok.bos_id] + tok.encode("def f(")],
        6,
        stop_tokens=[tok.eos_id],
        valid_vocab=tok.vocab_size,
    ).tokens[0]
    want = [t for t in want if t != tok.eos_id]
    assert len(want) >= 1 and all(t < tok.vocab_size for t in want)
    assert text == "".join(tok.decode([t]) for t in want)


def test_sample_output_says_when_the_completion_is_whitespace():
    from eval.sample import show

    assert show("def f(", "x):\n    pass") == "def f(x):\n    pass"
    spaces = show("def fib(n):", "   \n  ")
    assert spaces.splitlines()[0] == "prompt: 'def fib(n):'"
    assert spaces.splitlines()[1].startswith("completion: '   \\n  ' (whitespace only, 6 chars")
    assert "completion: '' (empty" in show("x", "")


def test_corrupt_init_params_export_is_one_line(tmp_path):
    """An export whose data files were cut short is named unreadable (not 'does not fit')."""
    import jax

    from model import init_params, presets
    from model.export import save_params

    cfg = presets.get("tiny")
    export = tmp_path / "export"
    save_params(str(export), cfg, init_params(cfg, jax.random.PRNGKey(0)))
    cut = [f for f in export.rglob("*") if f.is_file() and f.parent.name == "d"]
    assert cut
    for f in cut:
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    out = _main(
        "--config.model=tiny", f"--config.init_params_from={export}", f"--workdir={tmp_path}/w"
    )
    assert out.returncode == 2, out.stdout + out.stderr[-3000:]
    lines = [l for l in out.stderr.splitlines() if "error: " in l]
    assert len(lines) == 1 and "unreadable (corrupt or truncated files?)" in lines[0], out.stderr
    assert "Traceback" not in out.stderr, out.stderr[-3000:]


def _tiny_hf_folder(tmp_path, edit):
    """The tiny preset saved as an HF folder, its safetensors file then damaged by `edit`."""
    import jax

    from model import init_params, presets, save_hf_checkpoint
    from model.safetensors_io import SafetensorsFile

    cfg = presets.get("tiny")
    hf = tmp_path / "hf"
    save_hf_checkpoint(cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(0))), str(hf))
    path = str(hf / "model.safetensors")
    f = SafetensorsFile(path)
    tensors = {k: np.array(f.get(k)) for k in f.keys()}
    f.close()
    edit(path, tensors)
    return hf


_DOWN = "model.layers.0.mlp.down_proj.weight"


def _truncate(path, tensors):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda p, t: _save_without(p, t, _DOWN), f"missing tensor {_DOWN}"),
        (
            lambda p, t: _save_with(p, t, _DOWN, np.zeros((3, 3), np.float32)),
            f"tensor {_DOWN} has shape (3, 3)",
        ),
        (_truncate, "is truncated"),
    ],
    ids=["missing_tensor", "wrong_shape", "truncated"],
)
def test_damaged_hf_folder_is_one_line(edit, expected, tmp_path):
    hf = _tiny_hf_folder(tmp_path, edit)
    out = _main(f"--config.model={hf}", f"--workdir={tmp_path}/w")
    assert out.returncode == 2, out.stdout + out.stderr[-3000:]
    lines = [l for l in out.stderr.splitlines() if "error: " in l]
    assert len(lines) == 1 and expected in lines[0] and str(hf) in lines[0], out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]


def _save_without(path, tensors, name):
    from safetensors.numpy import save_file

    tensors.pop(name)
    save_file(tensors, path)


def _save_with(path, tensors, name, value):
    from safetensors.numpy import save_file

    tensors[name] = value
    save_file(tensors, path)
