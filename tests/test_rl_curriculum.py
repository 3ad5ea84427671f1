"""rl.curriculum: tasks of a kind whose recent groups had no outcome spread are skipped before
sampling (rl/sampling/curriculum.py), written as empty groups, and counted by the trainer, never
trained."""

import json
import os
import types

import numpy as np

from configs import rl as rl_config
from rl.learning import batch_source
from rl.sampling import sampler_process
from rl.sampling.curriculum import Curriculum, task_key
from rl.stores.store import RolloutStore


def _task(package):
    return types.SimpleNamespace(meta={"package": package}, id=package)


def _group(outcomes):
    return [{"reward": o, "reward_terms": {"outcome": o}} for o in outcomes]


def test_task_key_follows_attributes_and_dicts():
    assert task_key(_task("ledger"), "meta.package") == "ledger"
    assert task_key(_task("ledger"), "meta.template") is None
    assert task_key(types.SimpleNamespace(), "meta.package") is None


def test_a_kind_is_skipped_only_after_its_last_groups_had_no_spread():
    cur = Curriculum("meta.package", after=2, prob=1.0)
    a, b = _task("a"), _task("b")
    cur.record(a, _group([0.0, 0.0]))
    assert not cur.skip(a, 0)  # one settled group < after
    cur.record(a, _group([1.0, 1.0]))  # all passed: no spread either
    cur.record(b, _group([0.0, 1.0]))
    cur.record(b, _group([0.0, 0.0]))
    assert cur.skip(a, 1) and not cur.skip(b, 2)  # b's last two groups include one with spread
    assert not cur.skip(_task(None), 3)  # no kind: never skipped
    cur.record(a, _group([0.0, 1.0]))  # a probe with spread resumes the kind
    assert not cur.skip(a, 4) and cur.skipped == 1


def test_skip_probability_is_seeded_per_task_and_off_by_default():
    a = _task("a")
    decisions = []
    for _ in range(2):
        cur = Curriculum("meta.package", after=1, prob=0.5, seed=7)
        cur.record(a, _group([0.0, 0.0]))
        decisions.append([cur.skip(a, j) for j in range(400)])
    assert decisions[0] == decisions[1]  # same (seed, index): same decision
    assert 0.4 < np.mean(decisions[0]) < 0.6
    off = Curriculum()
    off.record(a, _group([0.0, 0.0]))
    assert not off.skip(a, 0) and not off.enabled


def test_trainer_counts_skipped_groups_and_never_trains_them():
    class Store:
        groups = {"000000": [], "000001": _group([0.0, 1.0]), "000002": _group([1.0, 0.0])}

        def list(self):
            return sorted(self.groups)

        def get(self, g):
            return [dict(r, versions=np.array([0]), mask=np.array([1])) for r in self.groups[g]]

    import ml_collections

    rl = ml_collections.ConfigDict(dict(groups_per_batch=2, max_staleness=2, dynamic_sampling=True))
    books = batch_source.Books([f"{j:06d}" for j in range(3)])
    recs, ids, _ = batch_source.select(Store(), books, rl, 0)
    assert ids == ["000001", "000002"] and len(recs) == 4
    assert books.skipped == 1 and "000000" in books.consumed and not books.unfinished()
    assert batch_source.Books.from_json(books.to_json()).skipped == 1  # in the checkpoint


def test_sampler_loop_writes_skipped_tasks_as_empty_groups(tmp_path, monkeypatch):
    """The real sampler_loop on the tiny preset with a stand-in sampler whose every episode fails:
    with after=1, prob=1 the first group of a kind is played, the kind's later tasks are skipped;
    another kind is still played."""
    played = []

    class Failing:
        def play(self, tasks, weights, seed):
            played.extend(t.meta["package"] for t in tasks)
            return [_group([0.0, 0.0]) for _ in tasks]

    kinds = ["a", "a", "b", "a", "b", "a"]
    monkeypatch.setattr(sampler_process, "make_sampler", lambda rl, cfg, *mesh: Failing())
    monkeypatch.setattr(sampler_process, "make_task", lambda rl, j: _task(kinds[j]))
    c = rl_config.get_config()
    c.rl.update(pool_size=6, groups_per_call=1, max_ahead=100)
    c.rl.curriculum.update(key="meta.package", after=1, prob=1.0)
    with open(tmp_path / "pool.json", "w") as f:
        json.dump({"order": list(range(6))}, f)
    os.makedirs(tmp_path / "weights")
    assert sampler_process.sampler_loop(c, str(tmp_path), 0) == 6
    store = RolloutStore(str(tmp_path / "rollouts"))
    sizes = [len(store.get(g)) for g in store.list()]
    assert played == ["a", "b"] and sizes == [2, 0, 2, 0, 0, 0]
