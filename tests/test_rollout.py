"""Rollouts on the open engine (model/engine/ + rl/sampling/rollout.py), on the real tiny preset:
continuing a slot == one fresh prefill; no sampled id outside the valid set; the number of compiled
programs stays within the documented bound over a 50-episode run; real CodingEnv episodes (real
sandbox) are token-exact, carry rl/episodes/rewards.py's reward of their grade and counts (the
summary reports the same numbers), and a training forward with the replayed experts reproduces the
sampler's log-probs on every policy token (blocked dispatch, float32); a group branched from a
shared prefix (snapshots) equals fresh episodes replayed to the same state and runs the prefix once.
"""

import collections
import json
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from data.chat import generation_prompt, tool_call_text
from data.tokenizers import ByteTokenizer
from model import Transformer, init_params, presets
from model.decode import init_layer_caches, split_layers
from model.engine import RolloutEngine, forward_rows
from model.engine.programs import _decode_jit, _prefill_jit
from model.sampling import SamplingParams, filtered_logprobs, mask_invalid, sample
from rl.envs import CodingEnv, OraclePolicy, generate_task, generate_tasks, run_episode
from rl.envs.agent import tools
from rl.envs.agent.env import DEFAULT_SYSTEM
from rl.envs.agent.scripted import minimal_edit
from rl.episodes import records as rr
from rl.episodes import rewards as rw
from rl.episodes.episode_metrics import passes
from rl.episodes.rewards import LengthTerm, RewardConfig
from rl.episodes.schema import EpisodeRecord
from rl.sampling.rollout import play_episodes

TOK = ByteTokenizer()


def tiny(moe_impl="blocked", **kw):
    cfg = presets.get("tiny", moe_impl=moe_impl, **kw)
    return cfg, init_params(cfg, jax.random.PRNGKey(0))


@pytest.mark.parametrize("moe_impl,kv_len", [("blocked", None), ("dense", None), ("blocked", 48)])
def test_continuing_a_slot_equals_one_fresh_prefill(moe_impl, kv_len):
    """kv_len: the prefill's cache window (positions [0, 48) of 64; every piece ends below 48)."""
    cfg, params = tiny(moe_impl)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, 40).astype(np.int32)
    full = jax.jit(lambda t: Transformer(cfg).apply({"params": params}, t).logits)
    fresh = full(jnp.asarray(ids)[None])[0]  # jitted: eager op-by-op dispatch compiles every op
    split = split_layers(params)
    step = jax.jit(lambda c, rows, t, p: forward_rows(cfg, split, c, rows, t, p, kv_len))
    cache = init_layer_caches(cfg, 3, 64)
    # A longer earlier episode's entries past 48 (at their own positions): masked or out of window.
    stale = {"latent": 7.0, "rope": 7.0, "positions": jnp.arange(48, 64)}
    cache = jax.tree.map(
        lambda c: {k: c[k].at[1, 48:].set(v) for k, v in stale.items()},
        cache,
        is_leaf=lambda c: isinstance(c, dict) and "latent" in c,
    )
    rows = jnp.asarray([1, 3], jnp.int32)  # slot 1 + one padding row (>= B: never written)
    got = []
    for a, b in ((0, 13), (13, 14), (14, 40)):  # prompt, one decode-sized piece, an observation
        toks = np.zeros((2, 32), np.int32)
        pos = np.full((2, 32), -1, np.int32)
        toks[0, : b - a], pos[0, : b - a] = ids[a:b], np.arange(a, b)
        out, cache = step(cache, rows, jnp.asarray(toks), jnp.asarray(pos))
        got.append(out.logits[0, : b - a])
    np.testing.assert_allclose(np.concatenate(got), fresh, rtol=0, atol=1e-5)
    moe = cache["moe"]  # one cache per layer
    assert all(int(jnp.max(c["positions"][0])) == -1 for c in moe)  # other slots untouched
    assert all(bool(jnp.all(c["latent"][1, 48:] == 7)) for c in moe)  # nothing written past 40


def test_no_sampled_id_outside_the_valid_set():
    logits = jax.random.normal(jax.random.PRNGKey(1), (512, 320)).at[:, 272:].add(1e4)
    for t, k, p in ((1.0, 0, 1.0), (0.7, 50, 0.9), (0.0, 0, 1.0)):
        lp = filtered_logprobs(logits, SamplingParams.make(t, k, p, valid=272))
        ids = sample(jax.random.PRNGKey(2), lp, t <= 0)
        assert int(ids.max()) < 272
        assert bool(jnp.all(jnp.isneginf(lp[:, 272:])))
        np.testing.assert_allclose(jax.nn.logsumexp(lp, -1), 0.0, atol=1e-5)
    assert bool(jnp.all(jnp.isneginf(mask_invalid(logits, 272)[:, 272:])))

    # The real model with its padded head columns blown up: unmasked it samples them; masked never.
    cfg, params = tiny()
    params = dict(params, lm_head=params["lm_head"].at[:, 272:].multiply(40.0))
    counts = {}
    for valid in (0, 272):
        eng = RolloutEngine(cfg, params, slots=4, cache_len=64, valid_vocab=valid, seed=valid)
        for r in range(4):
            eng.submit(r, [TOK.bos_id, 5 + r, 7], max_new=24)
        out = []
        while eng.busy:
            out += [t for turn in eng.step() for t in turn.tokens]
        counts[valid] = (sum(t >= 272 for t in out), len(out))
    assert counts[0][0] > counts[0][1] // 2  # the test is meaningful: padded ids dominate
    assert counts[272] == (0, 96)


class StandInEnv:
    """A stand-in for CodingEnv (loop mechanics only: no sandbox): random prompt and observation
    lengths (below `prompt_max` and `obs_max` tokens), a fixed number of turns."""

    def __init__(self, rng, prompt_max=28, obs_max=24):
        self.rng, self.max_tokens = rng, 10_000
        self.prompt_max, self.obs_max = prompt_max, obs_max

    def reset(self, task):
        n = int(self.rng.integers(2, self.prompt_max))
        prompt = [TOK.bos_id] + [int(x) for x in self.rng.integers(0, 256, n)]
        self.rec = EpisodeRecord(
            task.id, prompt, [0] * len(prompt), len(prompt), 0, 0, 0, 0, [], [], ""
        )
        return prompt

    def step(self, emitted):
        rec = self.rec
        rec.turn_spans.append((len(rec.tokens), len(rec.tokens) + len(emitted)))
        rec.tokens += emitted
        rec.mask += [1] * len(emitted)
        rec.turns += 1
        if rec.turns == 3:
            rec.done_reason = "turn_limit"
            return [], True
        obs = [int(x) for x in self.rng.integers(0, 256, int(self.rng.integers(1, self.obs_max)))]
        rec.tokens += obs
        rec.mask += [0] * len(obs)
        return obs, False

    def record(self):
        return self.rec

    def close(self):
        pass


def test_compiled_programs_stay_within_the_bound_over_50_episodes():
    cfg, params = tiny()
    tasks = [type("T", (), {"id": f"t{i}"})() for i in range(25)]
    # A 32-token cache: episodes of <= 1 + 7 prompt + 3 x 4 policy + 2 x 5 observation = 30
    # tokens, so contexts still cross every window with few programs (each one compiles).
    eng = RolloutEngine(cfg, params, slots=4, cache_len=32, valid_vocab=TOK.vocab_size)
    before = _prefill_jit._cache_size() + _decode_jit._cache_size()
    rng = np.random.default_rng(0)
    out = play_episodes(
        eng,
        TOK,
        tasks,
        group_size=2,
        max_turn_tokens=4,
        env_factory=lambda: StandInEnv(rng, prompt_max=8, obs_max=6),
    )
    assert len(out.records) == 50 and out.stats["errors"] == 0
    assert {r["counts"]["turns"] for r in out.records} == {3}
    compiled = _prefill_jit._cache_size() + _decode_jit._cache_size() - before
    # init, 2 fetches, end_turns, decode per R {1,2,4} x window W {16,24,32}, prefill per
    # R x T {16,32} x W
    assert compiled <= len(eng.programs) <= eng.max_programs == 4 + 3 * 3 + 3 * 2 * 3
    assert any(k[0] == "prefill" and k[1] > 1 for k in eng.programs)  # batched prefills happened
    assert len({k[3] for k in eng.programs if k[0] == "prefill"}) > 1  # windows grew with context
    assert len({k[2] for k in eng.programs if k[0] == "decode"}) > 1  # decode windows too
    assert len({k[1] for k in eng.programs if k[0] == "decode"}) > 1  # live rows only, compacted
    for r in out.records:
        assert [t for a, b in r["turn_spans"] for t in r["tokens"][a:b]] == [
            t for t, m in zip(r["tokens"], r["mask"]) if m
        ]


def test_decoding_in_a_small_window_keeps_a_paused_longer_slot():
    """Slot A (60-token prompt) pauses after a turn; slot B's short turns then decode alone (its
    row gathered out of the 2 slots) in cache windows below A's context (16 of 128 positions),
    writing back only that row and window. A's next turn
    must still see its whole cache: every log-prob A's turns recorded equals a full forward's over
    its final sequence, with the routing the engine recorded (float32)."""
    cfg, params = tiny()
    eng = RolloutEngine(cfg, params, slots=2, cache_len=128, temperature=1.0, min_bucket=16)
    rng = np.random.default_rng(1)
    ids = lambda n: [int(x) for x in rng.integers(3, cfg.vocab_size, n)]
    eng.submit("A", ids(60), max_new=4)
    turns = eng.step()
    assert [t.request for t in turns] == ["A"] and eng.programs >= {("decode", 1, 64)}
    eng.submit("B", ids(5), max_new=3)
    for _ in range(2):  # B alone: window 16 (length - 1 + max_new <= 16)
        (turn,) = eng.step()
        assert turn.request == "B"
        eng.extend("B", ids(2), max_new=3)
    eng.step()
    assert {k[2] for k in eng.programs if k[0] == "decode"} >= {16}
    eng.extend("A", ids(3), max_new=4)
    turns += [t for t in eng.step() if t.request == "A"]
    seq, experts = eng.sequence("A"), eng.finish("A")
    assert len(seq) == 60 + 4 + 3 + 4
    forced = jnp.asarray(np.moveaxis(experts, 0, 1))[:, None]  # [n,1,L,k]
    fwd = jax.jit(Transformer(cfg).apply)  # jitted: eager dispatch compiles every op
    out = fwd({"params": params}, jnp.asarray(seq[:-1])[None], forced_experts=forced)
    lp = jax.nn.log_softmax(out.logits[0], -1)
    for t in turns:
        want = [float(lp[t.start - 1 + i, tok]) for i, tok in enumerate(t.tokens)]
        np.testing.assert_allclose(t.logprobs, want, rtol=0, atol=1e-4)


def test_a_prompt_that_leaves_no_room_is_skipped_with_a_clear_error():
    """An episode whose prompt fills its token budget is counted as an error that says so, and the
    others still play."""
    cfg, params = tiny()
    eng = RolloutEngine(cfg, params, slots=2, cache_len=128, valid_vocab=TOK.vocab_size)
    rng = np.random.default_rng(0)
    # the first and third episodes' prompts overflow their budget; the second's whole episode fits
    # the cache (prompt <= 28 + 3 turns x 4 + 2 observations x <= 23 tokens < 128)
    budgets = iter([1, 10_000, 1])

    def env():
        e = StandInEnv(rng)
        e.max_tokens = next(budgets)
        return e

    tasks = [type("T", (), {"id": f"t{i}"})() for i in range(3)]
    out = play_episodes(eng, TOK, tasks, group_size=1, max_turn_tokens=4, env_factory=env)
    assert out.stats["errors"] == 2 and [r["task_id"] for r in out.records] == ["t1"]
    assert all(
        "leaves no room for a turn (episode budget 1" in m for m in out.stats["error_messages"]
    )


# Prefill buckets from 512: real episodes' prompts run to hundreds of tokens; smaller ones only
# add compiled programs (128: 16 across these tests, 512: 12). Small windows have their own test.
EPISODE_MIN_BUCKET = 512


@pytest.fixture(scope="module")
def real_episodes():
    cfg, params = tiny(max_position_embeddings=4096)  # records may pass the cache: see below
    task = generate_tasks(1, seed=0)[0]
    eng = RolloutEngine(
        cfg,
        params,
        slots=2,
        cache_len=2048,
        temperature=0.8,
        valid_vocab=TOK.vocab_size,
        params_version=7,
        min_bucket=EPISODE_MIN_BUCKET,
    )
    kw = dict(env_kwargs=dict(obs_token_budget=200), log_every_s=0, reward=LENGTH_REWARD)
    forced = play_episodes(eng, TOK, [task], scripted=lambda t: OraclePolicy(TOK, t), **kw)
    sampled = play_episodes(eng, TOK, [task], group_size=2, max_turn_tokens=40, **kw)
    assert forced.stats["errors"] == sampled.stats["errors"] == 0
    return cfg, params, task, forced, sampled


# A length term on top of the defaults, so each record's reward has three nonzero-able parts.
LENGTH_REWARD = RewardConfig(length={"tool_io_tokens": LengthTerm(lam=0.1, scale=100.0, power=0.5)})


def test_real_episodes_are_token_exact(real_episodes):
    _, _, task, forced, sampled = real_episodes
    records = forced.records + sampled.records
    prompt = generation_prompt(
        TOK,
        [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": task.prompt}],
    )
    oracle = OraclePolicy(TOK, task)
    for rec in records:
        back = rr.from_json(json.loads(json.dumps(rr.to_json(rec))))  # JSON round trip
        for k in rr.ARRAY_FIELDS:
            assert back[k].dtype == rec[k].dtype and np.array_equal(back[k], rec[k]), k
        assert {k: v for k, v in back.items() if k not in rr.ARRAY_FIELDS} == {
            k: v for k, v in rec.items() if k not in rr.ARRAY_FIELDS
        }
        tokens, mask, versions = rec["tokens"].tolist(), rec["mask"].tolist(), rec["versions"]
        assert tokens[: rec["prompt_len"]] == prompt
        spans = [range(a, b) for a, b in rec["turn_spans"]]
        assert mask == [int(any(t in s for s in spans)) for t in range(len(tokens))]
        assert np.all(versions[rec["mask"] > 0] == 7) and np.all(versions[rec["mask"] == 0] == -1)
        assert max(tokens) < TOK.vocab_size
        if rec["policy"] == "forced":
            assert [tokens[a:b] for a, b in rec["turn_spans"]] == oracle._turns
            assert rec["done_reason"] == "submit" and passes(rec)
            assert rec["counts"]["turns"] == 4
        # the observation between two turns is exactly what the env appended: tool results +
        # "<|assistant|>"
        for (_, b), (a2, _) in zip(rec["turn_spans"], rec["turn_spans"][1:]):
            assert tokens[a2 - 1] == TOK.special_id("assistant") and a2 > b
    assert sum(r["counts"]["turns"] for r in records) >= 6  # multi-turn episodes were played


def test_records_carry_the_rl_reward_and_the_summary_reports_it(real_episodes):
    """The oracle's episode, graded by the hidden tests in the sandbox: outcome 1, no malformed
    call, and the length term by hand; every record's reward is rl.episodes.rewards.episode_reward
    of its own grade and counts (no second score), and summary() shows the trainer's reward
    scalars."""
    _, _, task, forced, sampled = real_episodes
    (oracle,) = forced.records
    c = oracle["counts"]
    assert oracle["tests_passed"] == oracle["tests_total"] > 0 and not oracle["tampered"]
    assert c["malformed_calls"] == 0 and c["tool_io_tokens"] > 0
    length = -0.1 * ((1 + c["tool_io_tokens"] / 100.0) ** 0.5 - 1)  # LENGTH_REWARD by hand
    assert oracle["reward_terms"] == {
        "outcome": 1.0,
        "malformed": 0.0,
        "len_tool_io_tokens": pytest.approx(length, abs=1e-12),
    }
    assert oracle["reward"] == pytest.approx(1.0 + length, abs=1e-12)
    for rec in forced.records + sampled.records:
        want, terms = rw.episode_reward(rec, LENGTH_REWARD)
        assert rec["reward"] == want and rec["reward_terms"] == terms
        assert sum(terms.values()) == pytest.approx(rec["reward"], abs=1e-12)
        assert passes(rec) == (rec["tests_passed"] == rec["tests_total"] > 0)
    recs = sampled.records
    s = sampled.summary()
    assert s["episodes"] == len(recs) == 2
    assert s["reward/mean"] == pytest.approx(np.mean([r["reward"] for r in recs]), abs=1e-12)
    for k in ("outcome", "malformed", "len_tool_io_tokens"):
        want = np.mean([r["reward_terms"][k] for r in recs])
        assert s[f"reward/{k}"] == pytest.approx(want, abs=1e-12), k
    assert s["pass_rate"] == np.mean([passes(r) for r in recs])


def test_replayed_experts_reproduce_sampler_logprobs(real_episodes):
    cfg, params, _, forced, sampled = real_episodes
    records = forced.records + sampled.records
    fwd = jax.jit(
        lambda t, e: Transformer(cfg).apply({"params": params}, t, forced_experts=e).logits
    )
    for rec in records:
        # padded to 2560 (one compile; causal: padding changes nothing before). A context_limit
        # episode ends with its last observation, past the 2048-token cache (not past 2560).
        n = len(rec["tokens"])
        assert n <= 2560
        toks = np.zeros((1, 2560), np.int32)
        toks[0, :n] = rec["tokens"]
        experts = np.zeros((cfg.num_moe_layers, 1, 2560, cfg.num_experts_per_tok), np.int32)
        experts[:, 0, :n] = rec["experts"]
        logits = fwd(jnp.asarray(toks), jnp.asarray(experts))[0, : n - 1]
        lp = jax.nn.log_softmax(mask_invalid(logits, TOK.vocab_size) / 0.8, -1)  # the sampler's T
        lp = np.asarray(jnp.take_along_axis(lp, jnp.asarray(rec["tokens"][1:])[:, None], -1)[:, 0])
        m = rec["mask"][1:] > 0
        np.testing.assert_allclose(rec["logprobs"][1:][m], lp[m], rtol=0, atol=1e-4)
        assert np.all(rec["logprobs"][rec["mask"] == 0] == 0)


class Script:
    """A scripted policy: its turns in order (teacher-forced), then [] (the model samples)."""

    def __init__(self, turns):
        self.turns = [list(t) for t in turns]

    def __call__(self, context):
        return self.turns.pop(0) if self.turns else []


def _branch_engine(cfg, params, temperature=0.8):
    # real_episodes' engine settings: the compiled programs are shared within a session
    return RolloutEngine(
        cfg,
        params,
        slots=2,
        cache_len=2048,
        temperature=temperature,
        valid_vocab=TOK.vocab_size,
        min_bucket=EPISODE_MIN_BUCKET,
    )


def test_a_branched_group_equals_fresh_rollouts_and_runs_its_prefix_once(monkeypatch):
    """Best-of-2 from a 2-turn prefix (list_files, the fix's edit), then read the file, run the
    tests, submit, teacher-forced through the engine: each branch's record is the fresh episode's
    (tokens, mask, spans, grade, reward; log-probs to float noise), the read after the branch
    point shows the prefix's fix in every branch's sandbox, and the prefix's tool calls ran once
    where two fresh episodes run them twice. Branch 0 goes on in the prefix's slot, branch 1 is a
    new request prefilled with the shared transcript (both paths)."""
    cfg, params = tiny(max_position_embeddings=4096)
    task = generate_task("off_by_one", 11, 1)
    ((path, fixed),) = task.solution.items()
    old, new = minimal_edit(task.files[path], fixed)  # a short forced turn (few decode steps)
    script = [
        TOK.encode(tool_call_text(name, args), allow_special=True) + [TOK.special_id("end")]
        for name, args in (
            ("list_files", {}),
            ("edit", {"path": path, "old": old, "new": new}),
            ("read_file", {"path": path}),
            ("run_tests", {}),
            ("submit", {}),
        )
    ]
    calls, lock, execute = collections.Counter(), threading.Lock(), tools.execute

    def counting(sandbox, call, **kw):
        with lock:
            calls[call.name] += 1
        return execute(sandbox, call, **kw)

    monkeypatch.setattr(tools, "execute", counting)

    def play(**kw):
        calls.clear()
        out = play_episodes(
            _branch_engine(cfg, params),
            TOK,
            [task],
            group_size=2,
            scripted=lambda t: Script(script),
            log_every_s=0,
            **kw,
        )
        assert out.stats["errors"] == 0 and len(out.records) == 2
        return sorted(out.records, key=lambda r: r["sample"]), dict(calls), out.stats

    fresh, fresh_calls, _ = play()
    branched, branched_calls, stats = play(prefix_turns=2)
    each = ("list_files", "edit", "read_file", "run_tests", "submit")
    assert fresh_calls == dict.fromkeys(each, 2)
    assert branched_calls == dict(list_files=1, edit=1, read_file=2, run_tests=2, submit=2)
    shared = branched[0]["shared_prefix"]
    assert shared == branched[0]["turn_spans"][2][0]  # prompt, 2 turns, their observations
    prefix_tokens = len(script[0]) + len(script[1])
    assert stats["branched_groups"] == 1 and stats["shared_tool_calls"] == 2
    assert stats["shared_prefix_tokens"] == prefix_tokens  # decoded once, not twice
    (new_line,) = set(fixed.splitlines()) - set(task.files[path].splitlines())  # the fix
    for f, b in zip(fresh, branched):
        assert "shared_prefix" not in f and b["shared_prefix"] == shared
        assert b["tokens"].tolist() == f["tokens"].tolist()
        assert b["mask"].tolist() == f["mask"].tolist() and b["turn_spans"] == f["turn_spans"]
        for k in ("tests_passed", "tests_total", "done_reason", "reward", "counts"):
            assert b[k] == f[k], k
        assert passes(b) and b["done_reason"] == "submit"
        np.testing.assert_allclose(b["logprobs"], f["logprobs"], rtol=0, atol=1e-4)
        a, z = b["turn_spans"][2][1], b["turn_spans"][3][0]  # the read's observation
        assert new_line.strip() in TOK.decode(b["tokens"][a:z].tolist())


def test_branches_sample_their_own_continuations_each_a_fresh_episode_replayed():
    """A forced 2-turn prefix, then the model samples (temperature 1): the three branches share
    the prefix's tokens exactly, sample different continuations (each its own rng stream), and
    each record is what a fresh CodingEnv gives when its turns are replayed (tokens, mask,
    grade)."""
    cfg, params = tiny(max_position_embeddings=4096)
    task = generate_task("off_by_one", 11, 1)
    prefix = OraclePolicy(TOK, task)._turns[:2]
    out = play_episodes(
        _branch_engine(cfg, params, temperature=1.0),
        TOK,
        [task],
        group_size=3,
        max_turn_tokens=24,
        scripted=lambda t: Script(prefix),
        prefix_turns=2,
        log_every_s=0,
    )
    assert out.stats["errors"] == 0 and out.stats["branched_groups"] == 1
    recs = sorted(out.records, key=lambda r: r["sample"])
    n = recs[0]["shared_prefix"]
    assert [r["sample"] for r in recs] == [0, 1, 2] and all(r["shared_prefix"] == n for r in recs)
    assert all(r["tokens"][:n].tolist() == recs[0]["tokens"][:n].tolist() for r in recs)
    third = [tuple(r["tokens"][slice(*r["turn_spans"][2])].tolist()) for r in recs]
    assert len(set(third)) == 3  # the first sampled turn differs in every branch
    for r in recs:
        turns = [r["tokens"][a:b].tolist() for a, b in r["turn_spans"]]
        rec = run_episode(
            CodingEnv(TOK, max_tokens=2048), task, lambda c, turns=turns: turns.pop(0)
        )
        assert rec.tokens == r["tokens"].tolist() and rec.mask == r["mask"].tolist()
        assert (rec.tests_passed, rec.tests_total, rec.done_reason) == (
            r["tests_passed"],
            r["tests_total"],
            r["done_reason"],
        )
