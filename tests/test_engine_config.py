"""One engine sub-config and one builder (model/engine_config.py): every place that makes a decode
engine reaches `build_engine`, and for the same decode settings each builds the same
EngineConfig; no module outside the builder calls RolloutEngine(...) itself. One registry of RL
tasks (rl/sampling/rl_tasks.py): an unknown rl.task fails in one line naming the known ones.
The engine itself is never built here (the builder is replaced by a recorder that stops the
caller): what is checked is what each place asks the builder for."""

import ast
import dataclasses
import pathlib

import pytest

from configs import engine_block as engine_defaults
from configs import eval as eval_config
from configs import rl as rl_config
from configs import rollout as rollout_config
from configs import serve as serve_config
from data.tokenizers import ByteTokenizer
from model import presets
from model.engine_config import BLOCK_KEYS, EngineConfig
from model.errors import ConfigError

ROOT = pathlib.Path(__file__).resolve().parents[1]
# One setting of every config decode key; slots, cache_len, temperature and seed differ from
# configs/engine_block.py's defaults (a site that ignored one would build a different EngineConfig);
# min_bucket and speculative_k are the values eval's and generate's engines fix.
SETTINGS = dict(slots=1, cache_len=96, min_bucket=16, temperature=0.7, seed=3, speculative_k=0)


class Built(Exception):
    """Raised by the recording builder: the caller got as far as building its engine."""


@pytest.fixture
def built(monkeypatch):
    import model.engine_config as ec_mod
    import model.prompt_batch as pb

    calls = []

    def record(cfg, params, ec, **kw):
        calls.append((ec, kw))
        raise Built()

    monkeypatch.setattr(ec_mod, "build_engine", record)
    monkeypatch.setattr(pb, "build_engine", record)
    return calls


def _cfg():
    return presets.get("tiny", max_position_embeddings=SETTINGS["cache_len"])


def _serve():
    from rl.serve.server import build

    s = serve_config.get_config().serve
    s.update(**SETTINGS)
    build(s, _cfg(), None, ByteTokenizer(), log_dir="/nonexistent")


def _rollout(monkeypatch, tmp_path):
    from rl.sampling.rollout_main import run_rollouts

    monkeypatch.setenv("RL_ENVS_ALLOW_UNISOLATED", "1")  # the engine comes before any episode
    c = rollout_config.get_config()
    c.rl.update(n_tasks=1, **SETTINGS)
    run_rollouts(c, str(tmp_path))


def _coding_sampler():
    from rl.sampling.sampler_process import make_sampler

    rl = rl_config.get_config().rl
    rl.update(task="coding", max_tokens=SETTINGS["cache_len"], speculative_k=0)
    rl.update(temperature=SETTINGS["temperature"])
    rl.coding.update(slots=SETTINGS["slots"], min_bucket=SETTINGS["min_bucket"])
    make_sampler(rl, _cfg())._engine(None, 0, SETTINGS["seed"])


def _agentic():
    from eval.agentic import ModelPolicy

    p = ModelPolicy(
        _cfg(),
        None,
        ByteTokenizer(),
        temperature=SETTINGS["temperature"],
        seed=SETTINGS["seed"],
        max_tokens=SETTINGS["cache_len"],
    )
    p._engine()


def _generate():
    from model.prompt_batch import PromptBatch

    cfg = _cfg()
    s = SETTINGS
    PromptBatch(cfg, None, [[1, 2, 3]], 8, temperature=s["temperature"], seed=s["seed"])


def test_every_engine_site_builds_the_same_engine_config_through_the_one_builder(
    built, monkeypatch, tmp_path
):
    sites = {
        "serve": _serve,
        "rollout": lambda: _rollout(monkeypatch, tmp_path),
        "coding_sampler": _coding_sampler,
        "agentic": _agentic,
        "generate": _generate,
    }
    got = {}
    for name, site in sites.items():
        with pytest.raises(Built):
            site()
        got[name] = built[-1][0]
    assert len(built) == len(sites)
    want = EngineConfig(**SETTINGS)
    # generate sizes its cache to the prompts (3 + 8 tokens rounded up to 16: prompt_batch's
    # check_prompts); every other field and every other site: exactly the settings
    assert got.pop("generate") == dataclasses.replace(want, cache_len=16, stop_width=1)
    # serve: stop strings of two tokens, and raw log-probs for requests that ask
    from rl.serve import protocol as pr

    serve = got.pop("serve")
    assert serve == dataclasses.replace(want, stop_width=2, top_logprobs=pr.MAX_TOP_LOGPROBS)
    assert got == {name: want for name in got}, got


def test_block_keys_have_their_defaults_in_configs_only():
    """The decode keys of the serve and rollout blocks come from configs/engine_block.py (their one
    home); each block names only what differs."""
    assert set(BLOCK_KEYS) == set(engine_defaults.DECODE)
    serve, rollout = serve_config.get_config().serve, rollout_config.get_config().rl
    for key in BLOCK_KEYS:
        if key not in ("cache_len", "min_bucket"):
            assert serve[key] == rollout[key] == engine_defaults.DECODE[key], key
    assert (serve.cache_len, rollout.cache_len, rollout.min_bucket) == (512, 2048, 64)
    with pytest.raises(KeyError, match="unknown keys \\['slot'\\]"):
        engine_defaults.decode(slot=4)


def test_rl_and_eval_blocks_take_their_decode_defaults_from_the_engine_block(monkeypatch):
    """configs/rl.py and configs/eval.py name only the decode values that differ: the others are
    configs/engine_block.py's, so changing a default there changes it in every block."""
    monkeypatch.setitem(engine_defaults.DECODE, "temperature", 0.25)
    monkeypatch.setitem(engine_defaults.DECODE, "slots", 3)
    rl, ev = rl_config.get_config().rl, eval_config.get_config().eval
    assert (rl.temperature, rl.coding.slots, ev.agentic.temperature, ev.repos.temperature) == (
        0.25, 3, 0.25, 0.25
    )  # fmt: skip
    assert (rl.coding.min_bucket, ev.humaneval.temperature) == (64, 0.8)  # named: they differ
    with pytest.raises(KeyError, match="unknown keys \\['slot'\\]"):
        engine_defaults.decode_keys("slots", slot=4)


def test_from_block_clamps_the_context_to_the_model():
    s = serve_config.get_config().serve
    s.cache_len = 10_000
    assert EngineConfig.from_block(s, _cfg()).cache_len == SETTINGS["cache_len"]


def _engine_calls(path: pathlib.Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "id", getattr(n.func, "attr", None)) == "RolloutEngine"
    ]


def test_no_module_calls_the_engine_constructor_but_the_builder():
    files = [ROOT / "main.py"]
    for folder in ("model", "train", "rl", "eval", "data"):
        files += sorted((ROOT / folder).rglob("*.py"))
    calls = {
        str(f.relative_to(ROOT)): lines
        for f in files
        if (lines := _engine_calls(f)) and f.name != "engine_config.py"
    }
    assert calls == {}, f"build engines with model.engine_config.build_engine: {calls}"


def test_unknown_rl_task_fails_in_one_line_naming_the_known_ones():
    from rl.learning.loop import resolve
    from rl.sampling.rl_tasks import RL_TASKS
    from rl.sampling.sampler_process import make_task

    c = rl_config.get_config()
    c.rl.task = "codng"
    for call in (lambda: resolve(c), lambda: make_task(c.rl, 0)):
        with pytest.raises(ConfigError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and "rl.task='codng'" in msg
        assert all(name in msg for name in ("pattern", "summary_toy", "coding"))
    assert sorted(RL_TASKS) == ["coding", "pattern", "summary_toy"]
