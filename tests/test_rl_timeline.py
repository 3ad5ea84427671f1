"""The async-RL timeline (rl/episodes/timeline.py): per-thread spans to a Chrome trace whose spans
nest and never overlap within a thread, idle fractions per role, and the sampler loop's spans (a
stand-in sampler: the loop's bookkeeping alone)."""

import json
import os
import threading
import time

import numpy as np
import pytest

from configs import rl as rl_config
from rl.episodes import timeline
from rl.sampling import sampler_process


def _role(workdir, role, names):
    timeline.start(workdir, role, thread_only=True)
    try:
        with timeline.span(names[0]):
            time.sleep(0.02)
        with timeline.span(names[1]):
            with timeline.span(names[2]):
                time.sleep(0.01)
            time.sleep(0.01)
    finally:
        timeline.stop()


def test_spans_nest_per_thread_and_merge_to_a_chrome_trace(tmp_path):
    work = str(tmp_path)
    threads = [
        threading.Thread(target=_role,
                         args=(work, "trainer0", ("wait_batch", "after_step", "publish"))),
        threading.Thread(target=_role,
                         args=(work, "sampler0", ("wait_trainer", "generate", "sandbox_wait"))),
    ]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with timeline.span("unrecorded"):  # no recorder in this thread: nothing written
        pass
    with open(timeline.merge(work)) as f:
        trace = json.load(f)
    timeline.check(trace)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert sorted(e["name"] for e in spans) == sorted(
        ["wait_batch", "after_step", "publish", "wait_trainer", "generate", "sandbox_wait"]
    )
    assert {e["args"]["name"] for e in meta if e["name"] == "process_name"} == {
        "trainer0",
        "sampler0",
    }
    by = {e["name"]: e for e in spans}
    outer, inner = by["after_step"], by["publish"]  # nested: inside its parent
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert len({(e["pid"], e["tid"]) for e in spans}) == 2  # one track per thread
    idle = timeline.idle_fractions(spans)
    # trainer: 20 ms waiting of ~40 ms; sampler: 20 ms backpressure + 10 ms sandbox of ~40 ms
    assert 0.3 < idle["trainer0"] < 0.7 and idle["sampler0"] > idle["trainer0"]


def test_check_names_an_overlap_within_a_thread():
    ev = lambda name, ts, dur: {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 1,
                                "args": {"role": "r"}}  # fmt: skip
    timeline.check({"traceEvents": [ev("a", 0, 10), ev("b", 2, 3), ev("c", 10, 5)]})
    with pytest.raises(ValueError, match="b overlaps a"):
        timeline.check({"traceEvents": [ev("a", 0, 10), ev("b", 5, 10)]})
    with pytest.raises(ValueError, match="no 'dur'"):
        timeline.check({"traceEvents": [{"name": "a", "ph": "X", "ts": 0, "pid": 1, "tid": 1}]})


def test_sampler_loop_records_its_spans_and_timing(tmp_path, monkeypatch):
    from rl.learning.batch_source import step_metrics
    from rl.stores.store import RolloutStore

    class Slow:
        def play(self, tasks, weights, seed):
            time.sleep(0.01)
            rec = dict(reward=0.0, reward_terms={}, tokens=np.ones(3), mask=np.ones(3))
            return [[dict(rec), dict(rec)] for _ in tasks]

    monkeypatch.setattr(sampler_process, "make_sampler", lambda rl, cfg, *mesh: Slow())
    c = rl_config.get_config()
    c.rl.update(pool_size=4, groups_per_call=2, groups_per_batch=2)
    with open(tmp_path / "pool.json", "w") as f:
        json.dump({"order": list(range(4))}, f)
    os.makedirs(tmp_path / "weights")
    assert sampler_process.sampler_loop(c, str(tmp_path), 0) == 4
    with open(timeline.merge(str(tmp_path))) as f:
        trace = json.load(f)
    timeline.check(trace)
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert names.count("generate") == names.count("wait_trainer") == names.count("put_groups") == 2
    recs = [r for g in RolloutStore(str(tmp_path / "rollouts")).list()[:2]
            for r in RolloutStore(str(tmp_path / "rollouts")).get(g)]  # fmt: skip
    assert recs[0]["timing"]["generate_s"] >= 0.005  # half of a >= 10 ms call
    stats, sync = (
        {"staleness": [0, 0], "zero_signal": 0},
        {"bytes": 0, "seconds": 0.0, "full_bytes": 1},
    )
    m = step_metrics(recs, stats, {}, sync, dt=1.0)
    assert 0.0 <= m["idle/sampler"] < 1.0
