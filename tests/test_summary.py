"""Self-summarization (rl/envs/agent/summary.py): episodes longer than the context as chains of
segments. The scripted oracle solves long_lookup tasks through >= 2 summaries at a context budget
where the same policy without summaries fails; the protocol's edges (a voluntary summary, the
segment cap, an ignored instruction); on the real tiny preset, every segment's record is
token-exact and a replayed training forward reproduces the engine's log-probs (f32, 1e-4) while
the engine keeps the shared prefix's cache across the boundary; the chain's reward is identical
on its segments and advantages are per chain.
"""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import eval as eval_config
from data.chat import render_messages, tool_call_text
from data.tokenizers import ByteTokenizer
from eval import run
from model import Transformer, init_params, presets
from model.engine import RolloutEngine
from model.sampling import mask_invalid
from rl.envs import CodingEnv, Task, generate_task, run_episode
from rl.envs.agent.scripted import SummarizingPolicy, TracePolicy
from rl.envs.agent.summary import SummaryConfig, instruction_ids, summary_turn_ids
from rl.episodes import rewards
from rl.episodes.episode_metrics import passes
from rl.episodes.rewards import LengthTerm, RewardConfig, episode_reward
from rl.learning import batch as rb
from rl.learning import grpo
from rl.sampling.rollout import play_episodes
from rl.stores.store import RolloutStore

TOK = ByteTokenizer()
BUDGET, TRIGGER = 2560, 1500  # a long_lookup d2 task needs ~3,400-3,900 tokens of context
SUMMARY = SummaryConfig(trigger_tokens=TRIGGER, max_segments=6)


def _oracle(task, seed=0):
    return SummarizingPolicy(TOK, TracePolicy(TOK, task, random.Random(seed)), task)


@pytest.mark.parametrize("seed", [1, 2])
def test_scripted_policy_solves_long_tasks_only_through_summaries(seed):
    task = generate_task("long_lookup", seed=seed, difficulty=2)
    plain = run_episode(CodingEnv(TOK, max_tokens=BUDGET), task, _oracle(task, seed))
    assert plain.done_reason == "context_limit" and not plain.all_pass
    policy = _oracle(task, seed)
    rec = run_episode(CodingEnv(TOK, max_tokens=BUDGET, summary=SUMMARY), task, policy)
    assert rec.done_reason == "submit" and rec.all_pass and rec.malformed_calls == 0
    assert rec.summaries >= 2 and len(rec.segments) == rec.summaries
    segments = rec.all_segments()
    prefix = segments[0]["tokens"][: segments[0]["prompt_len"] - 1]
    for k, seg in enumerate(segments):
        assert len(seg["tokens"]) <= BUDGET and seg["tokens"][: len(prefix)] == prefix
        if k + 1 < len(segments):  # ends with the trained summary turn, after the instruction
            a, b = seg["turn_spans"][-1]
            assert b == len(seg["tokens"]) and seg["mask"][a:b] == [1] * (b - a)
            ask = instruction_ids(TOK) + [TOK.special_id("assistant")]
            assert seg["tokens"][a - len(ask) : a] == ask and not any(seg["mask"][a - len(ask) : a])
            nxt = segments[k + 1]
            # the next context: prefix, the summary turn verbatim (mask 0), the continue note
            assert nxt["tokens"][len(prefix) + 1 : len(prefix) + 1 + b - a] == seg["tokens"][a:b]
            assert not any(nxt["mask"][: nxt["prompt_len"]])
    # the last summary carries every code the fix needs (the facts seen before the trigger)
    last = TOK.decode(segments[-1]["tokens"][: segments[-1]["prompt_len"]])
    codes = task.solution[next(iter(task.solution))].split("'")[1].split("-")
    assert all(f"code {c}" in last for c in codes)
    assert policy.summaries and rec.summary_tokens > 0


def _tiny_task():
    return Task(
        id="tiny",
        prompt="make f return 2",
        files={"m.py": "def f():\n    return 1\n"},
        hidden_tests={"test_m.py": "from m import f\n\n\ndef test_f():\n    assert f() == 2\n"},
        solution={"m.py": "def f():\n    return 2\n"},
    )


def _call(name, args):
    return TOK.encode(tool_call_text(name, args), allow_special=True) + [TOK.special_id("end")]


def test_voluntary_summary_cap_and_ignored_instruction():
    task = _tiny_task()
    # a voluntary summary (no trigger reached) starts segment 2; on the last segment (cap 2) a
    # summary is refused with an error observation and the episode goes on
    turns = [
        _call("write_file", {"path": "m.py", "content": "def f():\n    return 2\n"}),
        summary_turn_ids(TOK, "wrote m.py"),
        summary_turn_ids(TOK, "again"),
        _call("submit", {}),
    ]
    env = CodingEnv(
        TOK, max_tokens=4096, summary=SummaryConfig(trigger_tokens=4000, max_segments=2)
    )
    rec = run_episode(env, task, lambda ctx: turns.pop(0))
    assert rec.done_reason == "submit" and rec.all_pass and rec.summaries == 1
    assert len(rec.segments) == 1 and rec.turns == 4 and rec.malformed_calls == 0
    assert "Files changed so far: m.py." in TOK.decode(rec.tokens[: rec.prompt_len])
    assert "error: no segments left" in TOK.decode(rec.tokens[rec.prompt_len :])
    # told to summarize (trigger at 1 token), the policy calls a tool instead: a broken turn
    turns = [_call("list_files", {}), _call("list_files", {})]
    env = CodingEnv(TOK, summary=SummaryConfig(trigger_tokens=1))
    rec = run_episode(env, task, lambda ctx: turns.pop(0))
    assert rec.done_reason == "no_summary" and rec.malformed_turns == [1]
    # without summarization a summary turn is a malformed one (control tokens in a turn)
    turns = [summary_turn_ids(TOK, "x"), _call("submit", {})]
    rec = run_episode(CodingEnv(TOK), task, lambda ctx: turns.pop(0))
    assert rec.malformed_turns == [0] and rec.summaries == 0 and not rec.segments
    # the chat template renders a summary turn to exactly the ids the protocol expects
    ids, mask = render_messages(TOK, [{"role": "assistant", "summary": "wrote m.py"}])
    assert ids[2:] == summary_turn_ids(TOK, "wrote m.py") and mask[2:] == [1] * (len(ids) - 2)


@pytest.fixture(scope="module")
def chain():
    """One long_lookup d1 episode of the scripted oracle, teacher-forced through the tiny model's
    engine with summaries (f32), and its records."""
    cfg = presets.get("tiny", moe_impl="blocked", max_position_embeddings=BUDGET)
    params = init_params(cfg, jax.random.PRNGKey(0))
    task = generate_task("long_lookup", seed=1, difficulty=1)
    eng = RolloutEngine(
        cfg, params, slots=1, cache_len=BUDGET, valid_vocab=TOK.vocab_size, min_bucket=128
    )
    out = play_episodes(
        eng,
        TOK,
        [task],
        scripted=_oracle,
        env_kwargs=dict(max_tokens=BUDGET, summary=SUMMARY),
        log_every_s=0,
        reward=CHAIN_REWARD,
    )
    assert out.stats["errors"] == 0, out.stats["error_messages"]
    return cfg, params, task, out


CHAIN_REWARD = RewardConfig(length={"output_tokens": LengthTerm(lam=0.1, scale=100.0)})


def test_segment_records_are_token_exact_and_replay_the_engine_logprobs(chain):
    cfg, params, _, out = chain
    recs = out.records
    assert len(recs) >= 3 and [r["segment"] for r in recs] == list(range(len(recs)))
    assert all(r["segments"] == len(recs) for r in recs)
    assert all(r["counts"]["summaries"] == len(recs) - 1 for r in recs)
    assert recs[-1]["done_reason"] == "submit" and passes(recs[-1])
    # the engine kept the system + task prefix's cache at each boundary (rewind, no re-prefill)
    keep = recs[0]["prompt_len"] - 1
    assert out.stats["segments_started"] == len(recs) - 1
    assert out.stats["prefix_reused_tokens"] == keep * (len(recs) - 1)
    fwd = jax.jit(
        lambda t, e: Transformer(cfg).apply({"params": params}, t, forced_experts=e).logits
    )
    for rec in recs:
        n = len(rec["tokens"])
        assert np.array_equal(rec["tokens"][:keep], recs[0]["tokens"][:keep]) and n <= BUDGET
        toks = np.zeros((1, BUDGET), np.int32)
        toks[0, :n] = rec["tokens"]
        experts = np.zeros((cfg.num_moe_layers, 1, BUDGET, cfg.num_experts_per_tok), np.int32)
        experts[:, 0, :n] = rec["experts"]
        logits = fwd(jnp.asarray(toks), jnp.asarray(experts))[0, : n - 1]
        lp = jax.nn.log_softmax(mask_invalid(logits, TOK.vocab_size), -1)  # temperature 1
        lp = np.asarray(jnp.take_along_axis(lp, jnp.asarray(rec["tokens"][1:])[:, None], -1)[:, 0])
        m = rec["mask"][1:] > 0
        assert m.sum() > 0
        np.testing.assert_allclose(rec["logprobs"][1:][m], lp[m], rtol=0, atol=1e-4)
        spans = [range(a, b) for a, b in rec["turn_spans"]]
        assert rec["mask"].tolist() == [int(any(t in s for s in spans)) for t in range(n)]


def test_chain_reward_is_shared_and_advantages_are_per_chain(chain, tmp_path):
    _, _, _, out = chain
    train = list(out.records)
    assert len({t["reward"] for t in train}) == 1 and len({t["chain"] for t in train}) == 1
    # summary tokens are emitted output tokens: they count in the length penalty
    counts = train[0]["counts"]
    assert counts["output_tokens"] >= counts["summary_tokens"] > 0
    assert train[0]["reward_terms"]["len_output_tokens"] < 0
    # the summary counts each chain once: its reward scalars are the chain's
    s = out.summary()
    assert s["episodes"] == 1 and s["reward/mean"] == train[0]["reward"]
    # a second chain of the group, one segment, failed (its grade changed): chain advantages
    # are +-(r1 - r0)/2 on every segment, not the segment-weighted baseline
    failed = dict(train[0], chain=1, sample=1, segments=1, tests_passed=0)
    failed["reward"], failed["reward_terms"] = episode_reward(failed, CHAIN_REWARD)
    train.append(failed)
    store = RolloutStore(str(tmp_path))
    store.put("000000", train)  # the chain fields survive the rollout store
    back = store.get("000000")
    assert [(r["chain"], r["segment"]) for r in back] == [(t["chain"], t["segment"]) for t in train]
    adv = grpo.chain_advantages(back)
    gap = (train[0]["reward"] - train[-1]["reward"]) / 2
    np.testing.assert_allclose(adv, [gap] * (len(train) - 1) + [-gap], rtol=1e-6)
    batch = rb.collate(back, seq_len=BUDGET, rows=len(back), n_moe_layers=1, k=2)
    for i in range(len(back)):
        m = batch["loss_mask"][i] > 0
        np.testing.assert_allclose(batch["advantages"][i][m], adv[i], rtol=1e-6)
    with pytest.raises(ValueError, match="segments with different rewards"):
        grpo.chain_advantages([dict(back[0]), dict(back[1], reward=back[0]["reward"] + 1)])


def test_agentic_eval_selects_long_lookup_and_reports_with_and_without_summaries():
    """--mode=eval's agentic suite (eval.run.agentic_suite) configured with eval.agentic.templates
    = long_lookup and a summary trigger: the reading oracle at one context budget solves every task
    with summaries and none without; per family summaries and segments per episode."""
    c = eval_config.get_config()
    c.eval.agentic.update(policy="reader", templates="long_lookup", difficulties="2", n_tasks=2)
    c.eval.agentic.update(ks="1", max_tokens=BUDGET, max_turns=20, verify=False)
    c.eval.agentic.summary.update(trigger_tokens=TRIGGER, max_segments=SUMMARY.max_segments)
    report = run.agentic_suite("oracle", None, None, c, TOK)
    metrics, items = report["metrics"], report["items"]
    assert [i["family"] for i in items] == ["long_lookup"] * 2
    assert metrics["long_lookup/pass_rate_with_summary"] == 1.0
    assert metrics["long_lookup/pass_rate_without_summary"] == 0.0
    assert metrics["pass_rate_with_summary"] == metrics["pass_rate"] == 1.0
    assert metrics["long_lookup/summaries"] >= 2
    assert metrics["long_lookup/segments"] == metrics["long_lookup/summaries"] + 1
    assert all(s["summaries"] >= 2 for i in items for s in i["samples"])


def test_shipped_summary_traces_replay_segment_by_segment():
    """data/traces/summary_traces.jsonl (python -m rl.envs.traces --summary): every segment renders;
    a non-final segment ends with its trained summary, which the next one holds untrained; one
    chain played again through CodingEnv gives exactly the shipped segments (real sandbox)."""
    import json
    import os

    path = os.path.join(
        os.path.dirname(os.path.dirname(__file__)), "data/traces/summary_traces.jsonl"
    )
    with open(path) as f:
        traces = [json.loads(line) for line in f]
    chains: dict = {}
    for t in traces:
        chains.setdefault(t["chain"], []).append(t)
    assert len(chains) >= 20 and all(len(c) == c[0]["segments"] >= 2 for c in chains.values())
    for chain in chains.values():
        for t, nxt in zip(chain, chain[1:]):
            assert "summary" in t["messages"][-1] and "weight" not in t["messages"][-1]
            copy = [m for m in nxt["messages"] if "summary" in m][0]
            assert copy == dict(t["messages"][-1], weight=0)
    chain = chains[min(chains)]
    task = generate_task(
        chain[0]["template"], seed=chain[0]["seed"], difficulty=chain[0]["difficulty"]
    )
    turns = [
        render_messages(TOK, [dict(m, weight=1)])[0][2:]
        for t in chain
        for m in t["messages"]
        if m["role"] == "assistant" and m.get("weight", 1)
    ]
    env = CodingEnv(TOK, max_tokens=BUDGET, summary=SUMMARY, max_turns=40)
    rec = run_episode(env, task, lambda ctx: turns.pop(0))
    assert rec.done_reason == "submit" and rec.all_pass and not turns
    assert [s["tokens"] for s in rec.all_segments()] == [
        render_messages(TOK, t["messages"])[0] for t in chain
    ]


def test_summary_toy_chains_carry_only_the_summary_across():
    """rl.task='summary_toy' (rl/sampling/summary_toy.py) on the tiny preset: two segments a chain,
    one reward and one chain id on both, segment 1 holds segment 0's summary but never the fact.
    With rl.summary_toy.expected_reward each summary record's sender_reward is answer_expectation
    of the sampler's forward, whose log-softmax at the sampled answer tokens is the engine's
    recorded logprobs (the distribution the answers came from: same temperature, same valid ids)."""
    from configs import rl as rl_config
    from rl.learning import loop
    from rl.sampling import sampler_process, summary_toy
    from rl.stores.weight_store import FixedWeights
    from train import trainer

    c = rl_config.get_config()
    c.rl.update(task="summary_toy", segments_per_chain=2, group_size=2, temperature=0.8)
    c.rl.summary_toy.expected_reward = True
    c = loop.resolve(c)
    facts, vv = c.rl.summary_toy.facts, c.rl.valid_vocab
    assert c.rl.valid_vocab == summary_toy.vocab(facts) and c.train.batch_size == 4 * 2 * 2
    cfg = loop.model_config(c)
    params = trainer.host_params(c, cfg)
    weights = FixedWeights(params)
    sampler = sampler_process.make_sampler(c.rl, cfg)
    tasks = [sampler_process.make_task(c.rl, j) for j in range(2)]
    groups = sampler.play(tasks, weights, seed=0)
    for task, group in zip(tasks, groups):
        assert [(r["chain"], r["segment"]) for r in group] == [
            (i, s) for i in range(2) for s in (0, 1)
        ]
        for r0, r1 in zip(group[::2], group[1::2]):
            summary = r0["tokens"][r0["mask"] > 0].tolist()
            answer = r1["tokens"][r1["mask"] > 0].tolist()
            assert len(summary) == c.rl.summary_toy.summary_tokens
            assert r1["tokens"][r1["mask"] == 0].tolist() == summary_toy.second_prompt(
                summary, facts
            )
            assert task.fact in r0["tokens"][r0["mask"] == 0]
            assert r0["reward"] == r1["reward"] == rewards.chain_reward(answer, task.fact)
            assert max(summary + answer) < summary_toy.vocab(facts)
        answers = [r1 for r1 in group[1::2]]
        assert all("sender_reward" not in r1 for r1 in answers)
        # the sampler's own jitted forward (a fresh one costs ~10 s here); the logprob check below
        # is what ties it to the engine that sampled the answers
        logits = np.asarray(sampler._forward(params, np.stack([r["tokens"][:-1] for r in answers])))
        for r0, r1, lg in zip(group[::2], answers, logits):
            want = summary_toy.answer_expectation(lg, r1["mask"], task.fact, 0.8, vv)
            np.testing.assert_allclose(r0["sender_reward"], want, rtol=1e-4, atol=1e-6)
            at = np.flatnonzero(np.asarray(r1["mask"])[1:] > 0)
            logp = jax.nn.log_softmax(lg[at, :vv] / 0.8, axis=-1)[
                np.arange(len(at)), r1["tokens"][at + 1]
            ]
            np.testing.assert_allclose(logp, np.asarray(r1["logprobs"])[at + 1], atol=2e-4)
    with pytest.raises(Exception, match="segments_per_chain >= 2"):
        c2 = rl_config.get_config()
        c2.rl.task = "summary_toy"
        loop.resolve(c2)
    # the bench's synchronous loop cannot skip tied groups: nothing would replace them
    with pytest.raises(Exception, match="rl.synchronous with rl.dynamic_sampling"):
        c3 = rl_config.get_config()
        c3.rl.update(synchronous=True, dynamic_sampling=True)
        loop.resolve(c3)


def test_summary_toy_batches_hold_every_fact_once():
    """rl.summary_toy.balanced (the default): in the training order every batch of
    groups_per_batch = facts groups holds each fact once, so an answer that ignores the summary
    gains nothing from a batch's mix; balanced=False draws facts per task (the first recipe)."""
    from configs import rl as rl_config
    from rl.sampling import sampler_process
    from rl.sampling.run_config import pool_order

    c = rl_config.get_config()
    c.rl.update(task="summary_toy", pool_size=64, seed=3)
    facts, per_batch = c.rl.summary_toy.facts, c.rl.groups_per_batch
    assert per_batch == facts
    order = [sampler_process.make_task(c.rl, j).fact for j in pool_order(c.rl)]
    batches = [sorted(order[i : i + per_batch]) for i in range(0, len(order), per_batch)]
    assert batches == [list(range(facts))] * (len(order) // per_batch)
    assert len({tuple(order[i : i + per_batch]) for i in range(0, 64, per_batch)}) > 1  # shuffled
    c.rl.summary_toy.balanced = False
    drawn = [sampler_process.make_task(c.rl, j).fact for j in pool_order(c.rl)]
    unbalanced = [sorted(drawn[i : i + per_batch]) != list(range(facts)) for i in range(0, 64, 4)]
    assert sum(unbalanced) > len(unbalanced) / 2  # independent draws: most batches are skewed


def test_summaries_with_a_speculative_engine_are_a_config_error():
    """A summary rewinds the slot (RolloutEngine.rewind), which a speculative engine refuses: the
    run must stop at resolve(), before any model loads, not in a sampler thread mid-run."""
    from configs import rl as rl_config
    from rl.learning import loop

    c = rl_config.get_config()
    c.rl.task = "coding"
    c.rl.coding.summary.update(trigger_tokens=512, max_segments=2)
    c.rl.update(segments_per_chain=2, speculative_k=2)
    with pytest.raises(Exception, match="summaries need a plain engine"):
        loop.resolve(c)
