"""The agentic suite: a scripted policy with a known pass rate through the real CodingEnv + sandbox
(the suite's bookkeeping, best-of-K, report, plot), and the tiny model as the policy
(reproducible, counts consistent with the episode records)."""

import pytest
from test_episode_metrics import suite_episode

from data.tokenizers import ByteTokenizer
from eval import agentic, plot
from eval.report import make_report
from rl.episodes.episode_metrics import credit, episode_metrics, passes

TEMPLATES = ("off_by_one", "boundary", "add_function")


@pytest.fixture(scope="module")
def tasks():
    return agentic.build_tasks(3, seed=0, templates=TEMPLATES, difficulties=(1,))


def test_scripted_policy_known_pass_rate(tasks, tmp_path):
    tok = ByteTokenizer()
    # task i is solved by samples s >= i: solved counts 4, 3, 2 of 4
    policy = agentic.ScriptedPolicy(tok, tasks, lambda i, s: s >= i, max_turns=8)
    episodes = agentic.run_suite(policy, tasks, n_samples=4)
    metrics, items = agentic.summarize(episodes, ks=[1, 2, 4])
    assert [it["solved"] for it in items] == [4, 3, 2]
    assert metrics["pass_rate"] == pytest.approx(9 / 12)
    # best-of-K by hand: pass@K per task from (n=4, c) = (4,4), (4,3), (4,2)
    assert metrics["best_of_1"] == pytest.approx((1 + 3 / 4 + 2 / 4) / 3)
    assert metrics["best_of_2"] == pytest.approx((1 + 1 + (1 - 1 / 6)) / 3)
    assert metrics["best_of_4"] == pytest.approx(1.0)
    assert metrics["best_of_1"] <= metrics["best_of_2"] <= metrics["best_of_4"]
    for e in episodes:
        solve = e["sample"] >= [t.id for t in tasks].index(e["task_id"])
        task = next(t for t in tasks if t.id == e["task_id"])
        c = e["counts"]
        assert passes(e) == solve and e["done_reason"] == "submit" and c["malformed_calls"] == 0
        assert c["tool_calls"] == c["turns"] == (len(task.solution) + 1 if solve else 1)
        if solve:
            assert credit(e) == 1.0
    assert metrics["malformed_rate"] == 0.0
    fams = {agentic.family(t) for t in tasks}
    assert fams == set(TEMPLATES)
    assert metrics[f"{agentic.family(tasks[2])}/pass_rate"] == pytest.approx(2 / 4)
    report = make_report("agentic", "scripted", metrics, items, {"completion": 1}, 1.0, 0, {})
    png = plot.score_vs_tokens(
        {"scripted": agentic.tokens_curve(report["metrics"], [1, 2, 4])}, str(tmp_path / "s.png")
    )
    assert open(png, "rb").read(4) == b"\x89PNG"


def test_best_of_k_monotone_on_random_outcomes():
    import random

    rng = random.Random(0)
    eps = [
        suite_episode(f"t{t}", "f", s, int(rng.random() < 0.3), 1, 10, 1, 0, 1)
        for t in range(7)
        for s in range(8)
    ]
    m = episode_metrics(eps, range(1, 9))
    values = [m[f"best_of_{k}"] for k in range(1, 9)]
    assert all(a <= b + 1e-12 for a, b in zip(values, values[1:]))
    assert values[0] == pytest.approx(sum(passes(e) for e in eps) / len(eps))


def test_tiny_model_policy_is_reproducible(tasks, tiny_model, byte_tok):
    """The model on the rollout driver: the same seed gives the same report; counts stay within
    the per-turn budget."""
    tok, (cfg, params) = byte_tok, tiny_model
    kw = dict(max_turn_tokens=8, temperature=1.0, seed=3, max_turns=2, system_prompt=None)

    def report(seed):
        policy = agentic.ModelPolicy(cfg, params, tok, **dict(kw, seed=seed))
        episodes = agentic.run_suite(policy, tasks[:2], n_samples=2, chunk=2)  # 2 play calls
        assert policy.errors == []
        return episodes, agentic.summarize(episodes, ks=[1, 2])

    first, rep = report(3)
    again, rep_again = report(3)
    assert first == again and rep == rep_again
    assert [(e["task_id"], e["sample"]) for e in first] == [
        (t.id, s) for t in tasks[:2] for s in (0, 1)
    ]
    for e in first:
        turns = e["counts"]["turns"]
        assert 1 <= turns <= 2 and 1 <= e["completion_tokens"] <= 8 * turns  # within its budget
        assert e["tests_total"] > 0 and not passes(e)  # random weights do not fix the bug
    with pytest.raises(ValueError, match="consecutive"):
        agentic.ModelPolicy(cfg, params, tok, **kw).play([(tasks[0], 1)])


def test_agentic_report_is_byte_identical_when_episodes_run_tests(tasks, tiny_model, byte_tok):
    """Every episode opens with a scripted run_tests call (pytest prints its wall time), then the
    tiny model samples the next turns conditioned on that observation: two runs with the same seed
    see the same observations (durations masked by rl.envs.agent.tools) and write the same
    report."""
    import json

    from data.chat import tool_call_text

    tok, (cfg, params) = byte_tok, tiny_model
    opening = tok.encode(tool_call_text("run_tests", {}), allow_special=True)
    opening.append(tok.special_id("end"))

    def run(seed):
        contexts = []  # (task id, context text) before each model-sampled turn

        def scripted(task):
            turns = []

            def turn(context):
                turns.append(len(context))
                if len(turns) == 1:
                    return opening
                contexts.append((task.id, tok.decode(context)))
                return []  # the model samples every turn after the opening

            return turn

        policy = agentic.ModelPolicy(
            cfg, params, tok, max_turn_tokens=8, temperature=1.0, seed=seed, max_turns=3,
            system_prompt=None, obs_token_budget=160, scripted=scripted,
        )  # fmt: skip
        episodes = agentic.run_suite(policy, tasks[:2], n_samples=2, chunk=2)
        assert policy.errors == []
        metrics, items = agentic.summarize(episodes, ks=[1, 2])
        report = make_report("agentic", "tiny", metrics, items, {"completion": 1}, 0.0, seed, {})
        return json.dumps(report, sort_keys=True), episodes, contexts

    first, episodes, contexts = run(3)
    again, _, contexts_again = run(3)
    assert first == again and contexts == contexts_again
    counts = [e["counts"] for e in episodes]
    assert all(c["tool_calls"] >= 1 and c["turns"] >= 2 for c in counts)  # run_tests, then model
    assert len(contexts) == sum(c["turns"] - 1 for c in counts)
    for _, text in contexts:  # the observation of run_tests, with its duration masked
        assert "exit_code=" in text and " in X.XXs" in text, text


def test_tampered_record_counts_as_failed(tasks):
    """A record whose grader caught tampering is a failure even with every test passing, and
    the episode carries the record's RL reward (rl/episodes/rewards.py: TAMPER_SCORE), not a score
    of its own."""
    from rl.episodes.records import episode_records
    from rl.episodes.rewards import TAMPER_SCORE, RewardConfig
    from rl.episodes.schema import EpisodeRecord

    def record(tampered):
        env_rec = EpisodeRecord(
            task_id=tasks[0].id,
            tokens=[1, 2, 3],
            mask=[0, 1, 1],
            prompt_len=1,
            turns=1,
            tool_calls=1,
            tool_io_tokens=2,
            malformed_calls=0,
            malformed_turns=[],
            turn_spans=[(1, 3)],
            done_reason="submit",
            tests_passed=3,
            tests_total=3,
            tampered=tampered,
        )
        arrays = dict(tokens=[1, 2, 3], logprobs=[0.0] * 3, versions=[-1, 0, 0], experts=[])
        (rec,) = episode_records(
            env_rec, [arrays], ByteTokenizer(), RewardConfig(), group=0, sample=0, policy="model"
        )
        return rec

    honest = agentic.played_episode(tasks[0], 0, record(False), 2, [1, 2, 3])
    cheat = agentic.played_episode(tasks[0], 1, record(True), 2, [1, 2, 3])
    assert honest["reward"] == 1.0 and cheat["reward"] == TAMPER_SCORE
    assert passes(honest) and credit(honest) == 1.0
    assert not passes(cheat) and credit(cheat) == 0.0 and cheat["completion_tokens"] == 2
    metrics, items = agentic.summarize([honest, cheat], ks=[1, 2])
    assert metrics["pass_rate"] == 0.5 and metrics["partial_credit"] == 0.5
    assert metrics["reward"] == (1.0 + TAMPER_SCORE) / 2
    assert items[0]["solved"] == 1
