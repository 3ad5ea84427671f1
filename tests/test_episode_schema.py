"""rl/episodes/schema.py, the one episode schema: the environment's finished episode, the records
it becomes, those records logged as JSON lines and read back, and eval's episode and report sample
all read back as the same `Episode`; partial credit is one rule, and a tampered episode gets none
however many tests its run claims passed."""

import dataclasses
import json
import types

import numpy as np
import pytest

from data.tokenizers import ByteTokenizer
from eval import agentic
from rl.envs import CodingEnv, OraclePolicy, Task, run_episode
from rl.envs.grading.tasks import Grade
from rl.episodes import records as rr
from rl.episodes.episode_metrics import episode_metrics
from rl.episodes.rewards import TAMPER_SCORE, LengthTerm, RewardConfig, outcome_reward
from rl.episodes.schema import COUNT_NAMES, Counts, Episode, EpisodeRecord, partial_credit

TOK = ByteTokenizer()
TASK = Task(
    id="simple",
    prompt="make f return 2",
    files={"m.py": "def f():\n    return 1\n"},
    hidden_tests={"test_m.py": "from m import f\n\ndef test_f():\n    assert f() == 2\n"},
    solution={"m.py": "def f():\n    return 2\n"},
)
# Fixes f and kills the grading runner on import: the grader marks the run tampered.
KILL_RUNNER = {
    "m.py": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    + "def f():\n    return 2\n"
}
REWARD = RewardConfig(outcome="fraction", length={"output_tokens": LengthTerm(lam=0.1)})


def play(edits=None):
    """(the env's record, its Episode, its records) for one OraclePolicy episode on TASK."""
    env_rec = run_episode(CodingEnv(TOK), TASK, OraclePolicy(TOK, TASK, edits))
    episode = rr.episode_facts(env_rec, TOK, REWARD)
    arrays = [
        dict(
            tokens=s["tokens"],
            logprobs=np.zeros(len(s["tokens"])),
            versions=np.zeros(len(s["tokens"])),
            experts=np.zeros((0, len(s["tokens"]), 0)),
        )
        for s in env_rec.all_segments()
    ]
    recs = rr.episode_records(env_rec, arrays, TOK, REWARD, group=0, sample=0, policy="model")
    return env_rec, episode, recs


def eval_forms(episode: Episode, env_rec) -> tuple[dict, dict]:
    """(eval's episode, its report sample) as eval/agentic.py keeps and writes them."""
    task = types.SimpleNamespace(meta={}, kind="custom")
    kept = agentic.played_episode(task, 0, episode, env_rec.generated_tokens, env_rec.tokens)
    _, items = agentic.summarize([kept], ks=(1,))
    return kept, items[0]["samples"][0]


def test_env_record_logged_record_and_eval_sample_round_trip_through_the_schema():
    env_rec, episode, recs = play()
    # the env's record became the episode: its grade and every count it keeps, by name
    assert episode.passes and (episode.tests_passed, episode.tests_total) == (1, 1)
    for name in ("turns", "tool_calls", "tool_io_tokens", "malformed_calls", "summaries"):
        assert getattr(episode.counts, name) == getattr(env_rec, name), name
    assert episode.counts.output_tokens > 0 and episode.reward < 1.0  # the length term is on
    assert episode.reward == sum(episode.reward_terms.values())
    # the records carry it, and a JSON line of `--mode=rollout` / the logs reads back as it
    for rec in recs:
        assert Episode.from_record(rec) == episode
        line = json.dumps(rr.to_json(rec))
        assert Episode.from_record(rr.from_json(json.loads(line))) == episode
    # eval keeps it (the record form) and writes it flat in the report: both read back as it
    kept, sample = eval_forms(Episode.from_record(recs[-1]), env_rec)
    assert Episode.from_record(kept) == episode
    assert Episode.from_record(json.loads(json.dumps(sample))) == episode
    assert (sample["solved"], sample["partial"]) == (True, 1.0)
    assert sample["completion_tokens"] == env_rec.generated_tokens
    # and the metrics read each form alike
    want = episode_metrics(recs)
    assert episode_metrics([kept]) == want


def test_a_missing_field_or_unknown_count_is_a_one_line_error():
    rec = Episode("t", "submit", 1, 1, False, Counts(1, 1, 0)).to_dict()
    del rec["counts"]["tool_calls"]
    with pytest.raises(ValueError, match="episode record of task 't' has no field 'tool_calls'"):
        Episode.from_record(rec)
    rec["counts"].update(tool_calls=1, tool_cals=2)
    with pytest.raises(ValueError, match=r"task 't': unknown count\(s\) \['tool_cals'\]"):
        Episode.from_record(rec)


def test_tampered_episode_gets_no_partial_credit_whatever_its_run_claims():
    """The one rule (fail closed): a tampered run's pass count is the policy's to write, so it is
    never read; partial credit is 0, the pass fails, and the reward is TAMPER_SCORE in both modes.
    Before the rule was one function, Grade.fraction read the claimed count (1.0 here)."""
    claimed = Episode("t", "submit", 2, 2, True, Counts(1, 1, 0))
    assert partial_credit(2, 2, True) == claimed.credit == 0.0 and not claimed.passes
    assert Grade(2, 2, "", tampered=True).fraction == 0.0
    assert outcome_reward(2, 2, "fraction", True) == outcome_reward(2, 2, "all_pass", True)
    assert outcome_reward(2, 2, "fraction", True) == TAMPER_SCORE
    assert partial_credit(1, 2, False) == Grade(1, 2, "").fraction == 0.5

    # a real one: the policy fixes f and kills the grading runner
    env_rec, episode, recs = play(KILL_RUNNER)
    assert env_rec.tampered and episode.tampered and not episode.passes
    assert episode.credit == 0.0 and episode.reward_terms["outcome"] == TAMPER_SCORE
    m = episode_metrics(recs)
    assert (m["pass_rate"], m["partial_credit"]) == (0.0, 0.0)
    _, sample = eval_forms(episode, env_rec)
    assert (sample["solved"], sample["partial"], sample["tampered"]) == (False, 0.0, True)


def test_the_env_builder_becomes_the_schema_episode_field_by_field():
    """The in-progress EpisodeRecord (the environment's) holds every Counts field but the token
    classes under the same name, so `episode()` drops none (a count added to Counts and not to the
    builder fails here), and its grade is the Episode's."""
    builder = {f.name for f in dataclasses.fields(EpisodeRecord)}
    assert set(COUNT_NAMES) - builder == {"thinking_tokens", "output_tokens"}
    rec = EpisodeRecord(
        "t", [1, 2, 3], [0, 1, 1], 1, 3, 2, 5, 1, [0], [(1, 3)], "submit", 2, 4, False
    )
    rec.summaries, rec.summary_tokens = 1, 7
    ep = rec.episode(thinking_tokens=4, output_tokens=6)
    assert ep.counts == Counts(3, 2, 1, tool_io_tokens=5, thinking_tokens=4, output_tokens=6,
                               summaries=1, summary_tokens=7)  # fmt: skip
    assert (ep.task_id, ep.done_reason, ep.tests_passed, ep.tests_total) == ("t", "submit", 2, 4)
    assert ep.credit == 0.5 and not ep.passes and ep.segments == 1
    assert Episode.from_record(json.loads(json.dumps(ep.to_dict()))) == ep
