"""rl.task='coding': the async loop (threads) on real CodingEnv episodes in the sandbox, tiny
preset.

Two tasks x G=2 episodes, one group per trainer step: records are token-exact (the trainer's
forward with replayed experts reproduces the sampler's log-probs at step 1, and its policy-token
count equals the records' mask sums), every group is trained exactly once, and there is one
reward from the sandbox's grade to TensorBoard: each record's reward is
rl.episodes.rewards.episode_reward of its hidden-test counts and episode counts (each part checked
by hand), and the trainer's event file holds those records' means as reward/mean and reward/<part>.
The sampler swaps weights inside an episode (a store whose version 1 appears mid-episode); the pool
holds training templates only, seeded (long_lookup only by name); the loop refuses to start (before
loading a model) without isolation; and with rl.coding.summary a chain's segments are trained with
one per-chain advantage.
"""

import glob
import itertools
import json
import os
import random

import ml_collections
import numpy as np
import pytest

from configs import rl as rl_config
from rl.envs import Sandbox, SandboxUnavailable, backend
from rl.envs.agent.scripted import SummarizingPolicy, TracePolicy
from rl.envs.grading.tasks import grade_in
from rl.envs.taskgen import HELD_OUT_TEMPLATES, LONG_CONTEXT_TEMPLATES, training_templates
from rl.episodes.episode_metrics import episode_metrics
from rl.episodes.rewards import LengthTerm, RewardConfig, episode_reward
from rl.learning import loop
from rl.sampling import coding_sampler, sampler_process
from rl.stores.store import RolloutStore
from rl.stores.weight_store import FixedWeights
from train import trainer
from train.tensorboard import read_scalars

REWARD_CFG = RewardConfig("fraction", 0.25, {"output_tokens": LengthTerm(0.1, 10.0, 0.5)})


def _sandbox_or_skip():
    try:
        backend()  # honours the conftest / RL_ENVS_ALLOW_UNISOLATED opt-in
    except SandboxUnavailable as e:
        pytest.skip(f"no usable sandbox: {e}")


def _config():
    c = rl_config.get_config()
    c.rl.update(
        task="coding",
        pool_size=2,
        group_size=2,
        groups_per_batch=1,
        groups_per_call=2,
        max_tokens=704,  # prompts of these two tasks: ~650 tokens
    )
    c.trainer_devices = 1  # one group of 2 episodes per step: rows for one device
    c.train.log_every = 100
    c.checkpoint.every_steps = 100
    c.rl.coding.update(max_turns=2, max_turn_tokens=24, slots=4, min_bucket=128)
    # outcome passed / total, a malformed-call penalty and a length term: three parts to follow
    c.rl.reward.update(outcome="fraction", malformed_penalty=0.25)
    c.rl.reward.length = ml_collections.ConfigDict(
        {"output_tokens": {"lam": 0.1, "scale": 10.0, "power": 0.5}}
    )
    return c


REWARD_PARTS = ("outcome", "malformed", "len_output_tokens")


def _reward_by_hand(r) -> dict:
    """The parts of configs above for one record, from its grade and counts."""
    c = r["counts"]
    return {
        "outcome": r["tests_passed"] / r["tests_total"],
        "malformed": -0.25 if c["malformed_calls"] > 0 else 0.0,
        "len_output_tokens": -0.1 * ((1 + c["output_tokens"] / 10.0) ** 0.5 - 1),
    }


def _untouched_grade(task):
    with Sandbox.from_files(task.files) as sb:
        for command in task.setup:  # as CodingEnv.reset does
            assert sb.run(command, 60.0).ok
        g = grade_in(sb, task)
    return g.passed, g.total


def test_coding_tasks_in_the_async_loop(tmp_path):
    _sandbox_or_skip()
    c = _config()
    out = loop.train(c, str(tmp_path))
    h, books = out["history"], out["books"]
    assert len(h) == 2
    with open(tmp_path / "journal.jsonl") as f:
        journal = [json.loads(line) for line in f]
    # each group trained exactly once, one per step
    assert [j["groups"] for j in journal] == [[g] for g in books.consumed]
    assert sorted(books.consumed) == ["000000", "000001"] and not books.dropped
    store = RolloutStore(str(tmp_path / "rollouts"))
    pool = sampler_process.coding_pool(c.rl.seed, 2, tuple(c.rl.coding.difficulties))
    untouched = {t.id: _untouched_grade(t) for t in pool}
    n_untouched = 0
    for step, entry in zip(h, journal):
        recs = store.get(entry["groups"][0])
        assert len(recs) == 2
        # the step's log is rl.episodes.episode_metrics' count over the trained records (the one
        # definition)
        want = episode_metrics(recs)
        assert {k: step[k] for k in ("pass_rate", "partial_credit", "turns", "malformed_rate")} == {
            k: want[k] for k in ("pass_rate", "partial_credit", "turns", "malformed_rate")
        }
        # the trainer's loss mask covers exactly the records' policy tokens
        assert step["policy_tokens"] == sum(int(r["mask"].sum()) for r in recs)
        for r in recs:
            m = r["mask"] > 0
            assert 0 < m.sum() <= 2 * 24  # max_turns x max_turn_tokens
            assert np.all(r["versions"][m] >= 0) and np.all(r["versions"][~m] == -1)
            assert np.all(r["logprobs"][~m] == 0) and np.all(r["logprobs"][m] < 0)
            assert len(r["tokens"]) <= 705 and r["experts"].shape[1] == len(r["tokens"])
            assert r["tests_total"] > 0 and not r["tampered"]
            parts = _reward_by_hand(r)
            assert r["reward_terms"] == pytest.approx(parts, abs=1e-12)
            assert r["reward"] == pytest.approx(sum(parts.values()), abs=1e-12)
            assert (r["reward"], r["reward_terms"]) == episode_reward(r, REWARD_CFG)
            if r["counts"]["tool_calls"] == 0:  # repo untouched: the grader's count for it
                n_untouched += 1
                assert (r["tests_passed"], r["tests_total"]) == untouched[r["task_id"]]
    assert n_untouched >= 1
    assert any(
        r["reward_terms"]["len_output_tokens"] < 0 for g in books.consumed for r in store.get(g)
    )
    # step 1 trains version-0 tokens with version-0 params: replayed routing + exact tokens give
    # the sampler's log-probs back (ratio 1)
    assert journal[0]["staleness"] == [0]
    assert abs(h[0]["ratio_mean"] - 1.0) < 1e-3, h[0]["ratio_mean"]
    # TensorBoard: per step, the trained records' reward and parts (each episode once)
    (events,) = glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))
    tb = {(step, tag): v for step, tag, v in read_scalars(events)}
    for step, entry in zip(h, journal):
        recs = [r for g in entry["groups"] for r in store.get(g)]
        want = {"reward/mean": np.mean([r["reward"] for r in recs])}
        want.update(
            {f"reward/{k}": np.mean([r["reward_terms"][k] for r in recs]) for k in REWARD_PARTS}
        )
        want["pass_rate"] = np.mean([r["tests_passed"] == r["tests_total"] for r in recs])
        for tag, value in want.items():
            assert tb[(step["step"], tag)] == pytest.approx(value, rel=1e-6, abs=1e-7), tag
            assert step[tag] == pytest.approx(value, abs=1e-12), tag  # the logged history


def _oracle_then_model(tok):
    """play_episodes' `scripted`: the first episode of each pair is the summarizing oracle
    (teacher-forced: it solves the task through a summary), the second is the model sampling
    (an untrained model never writes a well-formed summary, so only forcing makes a chain)."""
    calls = itertools.count()

    def scripted(task):
        if next(calls) % 2 == 0:
            return SummarizingPolicy(tok, TracePolicy(tok, task, random.Random(0)), task)
        return lambda context: []  # [] = the model samples this turn

    return scripted


# ~27 s of CPU: -m long for the suite's budget. In the default run: segment records token-exact
# with the engine's log-probs replayed (tests/test_summary.py::
# test_segment_records_are_token_exact_and_replay_the_engine_logprobs) and coding tasks through the
# async loop (test_coding_tasks_in_the_async_loop).
@pytest.mark.long
def test_coding_rl_with_summaries_trains_chains_of_segments(tmp_path, monkeypatch):
    """rl.coding.summary on: the loop main.py --mode=rl runs (loop.train) with each group's first
    episode teacher-forced by the summarizing oracle. Its chain's two segments go through the
    rollout store, collate and the loss: step 1 reproduces the sampler's log-probs on every
    segment (ratio 1, the second decoded after the engine's rewind), the loss masks all
    segments' policy tokens, and the advantages it trains are per chain, not per segment."""
    _sandbox_or_skip()
    from data.tokenizers import ByteTokenizer

    c = _config()
    # boundary d1: the prompt (~860 tokens with the summary line) + one read pass 1,000 tokens;
    # the oracle's forced turns fit 1,792 in both segments
    c.rl.update(max_tokens=1792, segments_per_chain=2, pool_size=1)
    c.rl.coding.update(templates=("boundary",), difficulties=(1,), max_turns=8)
    c.rl.coding.summary.update(trigger_tokens=1000, max_segments=2)
    play = coding_sampler.play_episodes
    scripted = _oracle_then_model(ByteTokenizer())
    monkeypatch.setattr(
        coding_sampler, "play_episodes", lambda *a, **k: play(*a, scripted=scripted, **k)
    )
    out = loop.train(c, str(tmp_path))
    (step,) = out["history"]
    (entry,) = [json.loads(line) for line in open(tmp_path / "journal.jsonl")]
    recs = RolloutStore(str(tmp_path / "rollouts")).get(entry["groups"][0])
    oracle = [r for r in recs if r["chain"] == 0]
    assert [(r["segment"], r["segments"]) for r in oracle] == [(0, 2), (1, 2)]
    assert all(r["done_reason"] == "submit" and r["reward_terms"]["outcome"] == 1.0 for r in oracle)
    assert oracle[0]["reward"] == oracle[1]["reward"]  # the chain's reward on every segment
    model = [r for r in recs if r["chain"] == 1]
    # the untouched boundary repo passes 2 of 3
    assert model and model[0]["reward_terms"]["outcome"] < 1.0
    assert step["policy_tokens"] == sum(int(r["mask"].sum()) for r in recs)
    assert abs(step["ratio_mean"] - 1.0) < 1e-3, step["ratio_mean"]
    # per chain: the group mean is over the 2 chains, so +-(r0 - r1)/2; per segment it would be
    # (r0 - r1)/3 and -2(r0 - r1)/3
    gap = (oracle[0]["reward"] - model[0]["reward"]) / 2
    tokens = [int(r["mask"][1:].sum()) for r in recs]
    expected = sum(n * gap for n in tokens) / sum(tokens)
    assert step["adv_abs_mean"] == pytest.approx(expected, rel=1e-5)
    assert step["adv_mean"] == pytest.approx(
        sum(n * gap * (1 if r["chain"] == 0 else -1) for n, r in zip(tokens, recs)) / sum(tokens),
        rel=1e-5,
    )


class _SwapsOnSecondPoll:
    """A weight store whose version 1 appears after the sampler's first poll (mid-episode)."""

    def __init__(self, params):
        self.params, self.polls = params, 0

    def latest(self):
        return self.params, 0

    def poll(self, version):
        self.polls += 1
        return (self.params, 1) if version == 0 and self.polls >= 2 else None


def test_coding_sampler_swaps_weights_in_flight():
    _sandbox_or_skip()
    c = _config()  # the loop test's settings: its compiled engine programs are reused
    cfg = loop.model_config(c)
    sampler = sampler_process.make_sampler(c.rl, cfg)
    task = sampler_process.make_task(c.rl, 0)
    weights = _SwapsOnSecondPoll(trainer.host_params(c, cfg))
    (group,) = sampler.play([task], weights, seed=1)
    assert sampler.swaps == 1 and len(group) == 2
    versions = [r["versions"][r["mask"] > 0] for r in group]
    for v in versions:  # tokens after the swap carry version 1, none goes back to 0
        assert set(v.tolist()) <= {0, 1} and np.all(np.diff(v) >= 0)
    # the episode decoded first got 2 tokens (swap_every) from version 0, the rest from 1: the
    # weights changed inside an episode, its cache kept
    assert any(set(v.tolist()) == {0, 1} for v in versions), versions


def test_coding_sampler_encodes_episodes_with_the_runs_tokenizer():
    """data.tokenizer is the samplers' too (resolve sets rl.coding.tokenizer and valid_vocab from
    it): with the HF fixture vocabulary the prompt decodes to the task's statement under that
    tokenizer, and every id, prompt and policy, lies in its vocabulary. A conflicting
    rl.coding.tokenizer or a missing file is a one-line ConfigError."""
    _sandbox_or_skip()
    from data.tokenizers import load_tokenizer
    from model.errors import ConfigError

    spec = "hf:" + os.path.join(os.path.dirname(__file__), "fixtures/data/tokenizer.json")
    tok = load_tokenizer(spec)
    c = _config()
    c.data.tokenizer, c.model_overrides = spec, {"vocab_size": tok.vocab_size}
    resolved = loop.resolve(c)
    assert resolved.rl.coding.tokenizer == spec and resolved.rl.valid_vocab == tok.vocab_size
    assert loop.resolve(_config()).rl.valid_vocab == load_tokenizer("byte").vocab_size
    sampler = sampler_process.make_sampler(resolved.rl, loop.model_config(resolved))
    task = sampler_process.make_task(resolved.rl, 0)
    (group,) = sampler.play([task], FixedWeights(trainer.host_params(resolved, sampler.cfg)), 1)
    for r in group:
        assert task.prompt.splitlines()[0] in tok.decode(r["tokens"][: r["prompt_len"]])
        assert 0 <= int(np.min(r["tokens"])) and int(np.max(r["tokens"])) < tok.vocab_size
    c.rl.coding.tokenizer = "byte"
    with pytest.raises(ConfigError, match="rl.coding.tokenizer='byte': it is set from"):
        loop.resolve(c)
    c.rl.coding.tokenizer, c.data.tokenizer = "", "hf:/no/such/tokenizer.json"
    with pytest.raises(ConfigError, match="data.tokenizer='hf:/no/such/tokenizer.json': HF "):
        loop.resolve(c)


def test_coding_pool_uses_training_templates_only():
    pool = sampler_process.coding_pool(0, 40, (1, 2, 3))
    families = {t.meta["template"] for t in pool}
    assert families == set(training_templates())
    assert not families & set(HELD_OUT_TEMPLATES)
    again = sampler_process.coding_pool.__wrapped__(
        0, 40, (1, 2, 3)
    )  # uncached: the pool is seeded
    assert [t.id for t in again] == [t.id for t in pool]
    one = sampler_process.coding_pool(
        0, 6, (1,), ("boundary", "rename")
    )  # a pool of chosen families
    assert [t.meta["template"] for t in one] == ["boundary", "rename"] * 3
    with pytest.raises(ValueError, match="regression_test not a training template"):
        sampler_process.coding_pool(0, 2, (1,), ("regression_test",))  # held out for eval: refused
    # the long-context family (self-summarization) is never in a default pool, only when named
    assert not families & set(LONG_CONTEXT_TEMPLATES)
    c = _config()
    c.rl.coding.update(templates=("long_lookup",), difficulties=(2,))
    long = [sampler_process.make_task(c.rl, j) for j in range(c.rl.pool_size)]
    assert [(t.meta["template"], t.difficulty) for t in long] == [("long_lookup", 2)] * 2


def test_coding_loop_refuses_to_start_without_isolation(tmp_path, monkeypatch):
    monkeypatch.setenv("RL_ENVS_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("RL_ENVS_ALLOW_UNISOLATED", raising=False)
    monkeypatch.delenv("RL_ENVS_SANDBOX", raising=False)

    def no_model(*a):
        raise AssertionError("a model was loaded before the isolation check")

    monkeypatch.setattr(loop, "model_config", no_model)
    with pytest.raises(SandboxUnavailable, match="/nonexistent/bwrap"):
        loop.train(_config(), str(tmp_path))
    assert not os.path.exists(tmp_path / "rl_config.json")
