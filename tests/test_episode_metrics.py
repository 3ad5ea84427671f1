"""rl.episodes.episode_metrics.episode_metrics, the one definition of episode metrics: hand-computed
values on a small record set (a chain of two segments, a tampered all-pass, a malformed call), the
unbiased best-of-K against the combinatorial formula, and its users (the agentic suite, the RL
step logs, the rollout summary, bench_rl_coding) reporting its numbers."""

import importlib.util
import math
import os
import random

import pytest

from eval import agentic
from rl.episodes.episode_metrics import credit, episode_metrics, passes
from rl.episodes.schema import Episode
from rl.learning import batch_source
from rl.sampling.rollout import summarize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rec(task, sample, passed, total, *, tampered=False, turns=2, calls=2, malformed=0, tokens=10,
        reason="submit", reward=None):  # fmt: skip
    """A training-style record (rl/sampling/coding_sampler.py): counts in 'counts', chain fields."""
    return dict(
        task_id=task, group_id=f"{task}/0", chain=sample, segment=0, segments=1,
        tests_passed=passed, tests_total=total, tampered=tampered, done_reason=reason,
        counts=dict(turns=turns, tool_calls=calls, malformed_calls=malformed),
        mask=[0] * 3 + [1] * tokens, tokens=[0] * (3 + tokens),
        reward=float(0 < total == passed) if reward is None else reward, reward_terms={},
    )  # fmt: skip


def segment(i: int, policy_tokens: int) -> dict:
    """Segment i of task a's sample 3: a chain of 2 (one summary) that passes 3/3, in the form
    the rollout driver writes (rl.episodes.records.episode_records: group and sample, not chain)."""
    n = policy_tokens + 2
    return dict(
        task_id="a", group=0, sample=3, group_id="a/0", tokens=[1] * n,
        mask=[0, 0] + [1] * policy_tokens, tests_passed=3, tests_total=3, tampered=False,
        done_reason="submit", segment=i, segments=2, reward=1.0, reward_terms={"outcome": 1.0},
        counts=dict(turns=2, tool_calls=2, malformed_calls=0, summaries=1),
    )  # fmt: skip


def suite_episode(task, family, sample, passed, total, tokens, calls, malformed, turns) -> dict:
    """An episode as eval/agentic.py keeps it, by hand: a chain's facts (rl.episodes.schema
    Episode.to_dict()) with the suite's fields; ended by submit, reward 0."""
    return dict(
        task_id=task, segments=1, done_reason="submit", tests_passed=passed, tests_total=total,
        tampered=False, reward=0.0, reward_terms={},
        counts=dict(turns=turns, tool_calls=calls, malformed_calls=malformed, summaries=0),
        family=family, sample=sample, completion_tokens=tokens, transcript="",
    )  # fmt: skip


def records():
    """8 episodes in 9 records. Task a: pass, 1/3, tampered 3/3, the chain (pass, 4 + 7 tokens).
    Task b: 0/2, 1/2 with 2 malformed calls and 1 good one, pass, no test ran (no tool call)."""
    return [
        rec("a", 0, 3, 3),
        rec("a", 1, 1, 3),
        rec("a", 2, 3, 3, tampered=True, reward=-1.0),
        segment(0, 4),
        segment(1, 7),
        rec("b", 0, 0, 2),
        rec("b", 1, 1, 2, calls=1, malformed=2, reward=-0.5),
        rec("b", 2, 2, 2),
        rec("b", 3, 0, 0, turns=1, calls=0, tokens=0, reason="no_tool_call"),
    ]


def test_hand_computed_metrics_on_mixed_records():
    m = episode_metrics(records(), ks=(1, 2, 4))
    assert (m["episodes"], m["tasks"]) == (8, 2)  # the chain's two records are one episode
    assert m["pass_rate"] == 3 / 8  # a0, the chain, b2; the tampered all-pass fails
    assert m["best_of_1"] == pytest.approx((2 / 4 + 1 / 4) / 2, abs=1e-15)
    # pass@2 = 1 - C(n-c, 2) / C(n, 2): a (4, 2) -> 1 - 1/6, b (4, 1) -> 1 - 3/6
    assert m["best_of_2"] == pytest.approx((5 / 6 + 1 / 2) / 2, abs=1e-15)
    assert m["best_of_4"] == 1.0
    assert m["partial_credit"] == pytest.approx((1 + 1 / 3 + 0 + 1 + 0 + 1 / 2 + 1 + 0) / 8)
    assert m["completion_tokens"] == (10 + 10 + 10 + (4 + 7) + 10 + 10 + 10 + 0) / 8
    assert m["tool_calls"] == (2 * 4 + 2 + 1 + 2 + 0) / 8 and m["turns"] == 15 / 8
    assert m["malformed_rate"] == 2 / 15  # malformed / (13 well-formed + 2 malformed) calls
    assert m["malformed_episodes"] == 1 / 8
    assert (m["summaries"], m["segments"]) == (1 / 8, 9 / 8)
    assert (m["done/submit"], m["done/no_tool_call"]) == (7 / 8, 1 / 8)
    # reward once per episode (the chain's reward, 1.0, not twice)
    assert m["reward"] == pytest.approx((1 + 0 - 1 + 1 + 0 - 0.5 + 1 + 0) / 8)


def test_pass_and_credit_follow_the_graders_rule():
    """The pass rule is rl.episodes.schema.all_pass, used by the grader (Grade.all_pass) and the
    reward's 'all_pass' outcome; credit restates the reward's 'fraction' outcome on stored counts
    (it imports no rl/ module): they agree on every grade."""
    from rl.envs.grading.tasks import Grade
    from rl.episodes.rewards import outcome_reward

    for total in range(4):
        for passed in range(total + 1):
            for tampered in (False, True):
                r = rec("a", 0, passed, total, tampered=tampered)
                assert passes(r) == Grade(passed, total, "", tampered=tampered).all_pass
                assert passes(r) == (outcome_reward(passed, total, "all_pass", tampered) == 1.0)
                assert credit(r) == max(outcome_reward(passed, total, "fraction", tampered), 0.0)


def test_chains_count_once_and_must_be_whole():
    chain = [segment(0, 4), segment(1, 7)]
    m = episode_metrics(chain)
    assert (m["episodes"], m["pass_rate"], m["completion_tokens"], m["segments"]) == (1, 1, 11, 2)
    with pytest.raises(ValueError, match=r"chain \('a', 0, 'a/0', 3\) has segments \[1\] of 2"):
        episode_metrics(chain[1:])
    whole = {k: v for k, v in chain[1].items() if k != "segment"}  # eval's form: chain facts
    m = episode_metrics([whole])
    assert (m["episodes"], m["segments"], m["summaries"], m["completion_tokens"]) == (1, 2, 1, 7)


def test_best_of_k_is_the_unbiased_estimator_not_the_any_pass_fraction():
    """Random (n, c) per task against 1 - C(n-c, k) / C(n, k) in exact rationals then float64;
    the raw fraction of tasks with any pass among n equals it only at k = n."""
    rng = random.Random(0)
    recs, counts = [], []
    for t in range(9):
        n = rng.randint(4, 9)
        outcomes = [rng.random() < 0.3 for _ in range(n)]
        counts.append((n, sum(outcomes)))
        recs += [rec(f"t{t}", s, int(ok), 1) for s, ok in enumerate(outcomes)]
    m = episode_metrics(recs, ks=(1, 2, 3, 4))
    for k in (1, 2, 3, 4):
        exact = sum(1 - math.comb(n - c, k) / math.comb(n, k) for n, c in counts) / len(counts)
        assert m[f"best_of_{k}"] == pytest.approx(exact, rel=1e-12, abs=1e-15)
    any_pass = sum(c > 0 for _, c in counts) / len(counts)
    assert m["best_of_2"] < any_pass  # the old bench count overstates best-of-2 from n > 2
    # n = k (bench_rl_coding: 4 episodes a task, best-of-4): estimator == any-pass fraction
    four = [rec(f"t{t}", s, int(s < t), 1) for t in range(5) for s in range(4)]
    assert episode_metrics(four, ks=(4,))["best_of_4"] == 4 / 5


def test_bad_records_get_one_line_errors():
    bad = rec("a", 0, 1, 1)
    del bad["tampered"]
    with pytest.raises(ValueError, match="record of task 'a' has no field 'tampered'"):
        episode_metrics([bad])
    with pytest.raises(ValueError, match="best_of_4 needs >= 4 episodes of every task"):
        episode_metrics([rec("a", s, 1, 1) for s in range(3)], ks=(4,))
    with pytest.raises(ValueError, match="no episodes"):
        episode_metrics([])
    # a reward mean over some of the episodes would not compare with one over all: omitted
    assert "reward" not in episode_metrics([rec("a", 0, 1, 1), Episode.dropped("a").to_dict()])


def test_agentic_suite_reports_the_function_overall_and_per_family():
    rng = random.Random(1)
    eps = [
        suite_episode(f"t{t}", f"fam{t % 2}", s, p, 3, 10 + s, 2, int(s == 1), 3)
        for t in range(6)
        for s in range(4)
        for p in [rng.choice([0, 2, 3])]
    ]
    metrics, items = agentic.summarize(eps, ks=[1, 2, 4])
    overall = episode_metrics(eps, ks=(1, 2, 4))
    assert {k: metrics[k] for k in overall} == overall
    fam0 = episode_metrics([e for e in eps if e["family"] == "fam0"], ks=(1, 2, 4))
    assert {k: metrics[f"fam0/{k}"] for k in fam0} == fam0
    assert sum(it["solved"] for it in items) == overall["pass_rate"] * len(eps)


def test_rl_step_logs_and_rollout_summary_report_the_function():
    recs = records()[:3] + records()[5:]  # the dict records (a chain's segments come next)
    stats, sync = (
        {"staleness": [0], "zero_signal": 0},
        {"bytes": 1, "seconds": 0.0, "full_bytes": 1},
    )
    m = batch_source.step_metrics(recs, stats, {}, sync, dt=1.0)
    want = episode_metrics(recs)
    assert {k: m[k] for k in want if k != "reward"} == {
        k: v for k, v in want.items() if k != "reward"
    }
    toy = [{"group_id": "g", "reward": 0.5, "reward_terms": {"outcome": 0.5}, "tokens": [1, 2],
            "mask": [0, 1]}]  # fmt: skip
    assert "pass_rate" not in batch_source.step_metrics(toy, stats, {}, sync, dt=1.0)  # ungraded
    chain = [segment(0, 4), segment(1, 7)]
    s = summarize(chain, {"wall_s": 2.0})
    want = episode_metrics(chain)
    assert s["reward/mean"] == want.pop("reward")  # the reward under its trainer-log name
    assert {k: s[k] for k in want} == want
    assert m["reward/mean"] == pytest.approx((1 + 0 - 1 + 0 - 0.5 + 1 + 0) / 7)
    assert (s["records"], s["policy_tokens"], s["episodes_per_s"]) == (2, 11, 0.5)


def test_bench_rl_coding_counts_heldout_with_the_function(monkeypatch):
    monkeypatch.setenv("COMPOSER_JAX_HUGEPAGES", "0")  # no re-exec of the test process on import
    path = os.path.join(ROOT, "bench", "bench_rl_coding.py")
    spec = importlib.util.spec_from_file_location("bench_rl_coding", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    groups = [[rec("a", s, int(s == 0), 1) for s in range(4)], [rec("b", 0, 1, 1)]]
    m = bench.heldout_metrics(["a", "b"], groups, 4)  # task b: 3 episodes dropped by the driver
    want = groups[0] + groups[1] + [Episode.dropped("b").to_dict()] * 3
    assert m == episode_metrics(want, ks=(1, 4))
    assert (m["pass_rate"], m["best_of_4"], m["done/error"]) == (2 / 8, 1.0, 3 / 8)
    assert "pass@1 0.250 best-of-4 1.000" in bench.describe(m) and "'error': 3" in bench.describe(m)


def test_bench_rl_coding_reuses_a_heldout_measurement_only_under_its_key(monkeypatch, tmp_path):
    """A re-run of the bench (issue 55's seeds, added one at a time) reuses the held-out figures
    it saved for the same params and settings, and measures again when either changed."""
    monkeypatch.setenv("COMPOSER_JAX_HUGEPAGES", "0")
    path = os.path.join(ROOT, "bench", "bench_rl_coding.py")
    spec = importlib.util.spec_from_file_location("bench_rl_coding", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    calls = []

    def measure(value):
        def run():
            calls.append(value)
            return {"pass_rate": value}

        return run

    saved = str(tmp_path / "heldout_before.json")
    key = {"params": "/x/params_240", "tasks": 48}
    assert bench.saved_heldout(saved, key, measure(0.25)) == {"pass_rate": 0.25}
    assert bench.saved_heldout(saved, dict(key), measure(0.5)) == {"pass_rate": 0.25}
    assert calls == [0.25]  # the second call read the file
    other = {**key, "params": "/x/run step 73"}
    assert bench.saved_heldout(saved, other, measure(0.5)) == {"pass_rate": 0.5}
    assert calls == [0.25, 0.5] and os.listdir(tmp_path) == ["heldout_before.json"]
