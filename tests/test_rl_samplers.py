"""The toy RL sampler with MTP speculative decoding (rl.speculative_k) on the real tiny preset:
greedy drafts + verify must give the plain sampler's episode records (tokens, main-model
log-probs, experts) exactly, since the recorded log-probs are what RL's importance ratio uses."""

import numpy as np

from configs import rl as rl_config
from rl.learning import loop
from rl.sampling import sampler_process
from rl.sampling.samplers import acceptance
from rl.stores.weight_store import FixedWeights
from train import trainer


def _records(speculative_k: int):
    c = rl_config.get_config()
    c.rl.update(temperature=0.0, speculative_k=speculative_k, max_new_tokens=6)
    cfg = loop.model_config(c)
    sampler = sampler_process.make_sampler(c.rl, cfg)
    tasks = [sampler_process.make_task(c.rl, j) for j in range(2)]
    weights = FixedWeights(trainer.host_params(c, cfg))
    groups = sampler.play(tasks, weights, seed=3)
    return [r for group in groups for r in group], dict(sampler.decode_stats, **sampler.counters)


def test_speculative_sampler_records_equal_plain_at_temperature_0():
    (plain, plain_stats), (spec, spec_stats) = _records(0), _records(2)
    assert plain_stats["drafted"] == 0 and spec_stats["drafted"] > 0  # it did speculate
    # The running counters (the sampler's step log, the trainer's spec/* metrics): every emitted
    # token; a plain sampler emits one per slot-step, a speculative one its accepted drafts more.
    plain_acc, spec_acc = acceptance(plain_stats), acceptance(spec_stats)
    for stats in (plain_stats, spec_stats):
        assert stats["tokens"] == 2 * rl_config.get_config().rl.group_size * 6
    assert "spec/acceptance" not in plain_acc and plain_acc["spec/tokens_per_verify"] <= 1.0
    # (the random-init MTP head's greedy drafts all miss here: acceptance 0, one token a step)
    assert spec_stats["drafted"] == 2 * spec_stats["slot_steps"]  # K=2 drafts a verify step
    assert spec_acc["spec/acceptance"] == spec_stats["accepted"] / spec_stats["drafted"]
    emitted = spec_stats["slot_steps"] + spec_stats["accepted"]  # accepted drafts + one each
    assert spec_acc["spec/tokens_per_verify"] == emitted / spec_stats["slot_steps"]
    assert len(plain) == len(spec) == 2 * rl_config.get_config().rl.group_size
    for a, b in zip(plain, spec, strict=True):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
        np.testing.assert_array_equal(a["mask"], b["mask"])
        np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=1e-5)
        np.testing.assert_array_equal(a["experts"], b["experts"])
        assert a["reward"] == b["reward"]


def test_sampler_loop_logs_acceptance_and_records_carry_it(tmp_path, monkeypatch, capsys):
    """Stand-in sampler (the loop's bookkeeping alone): each play call's counters go to the
    sampler's log line and, split over its groups, to the records; the trainer's step metrics
    count each group's share once."""
    import json
    import os

    from rl.learning.batch_source import step_metrics
    from rl.sampling.samplers import decode_counters
    from rl.stores.store import RolloutStore

    class Counting:
        counters = decode_counters()

        def play(self, tasks, weights, seed):
            self.counters.update(
                drafted=self.counters["drafted"] + 8,
                accepted=self.counters["accepted"] + 6,
                slot_steps=self.counters["slot_steps"] + 4,
                tokens=self.counters["tokens"] + 10,
            )
            rec = dict(reward=0.0, reward_terms={}, tokens=np.ones(3), mask=np.ones(3))
            return [[dict(rec), dict(rec)] for _ in tasks]

    monkeypatch.setattr(sampler_process, "make_sampler", lambda rl, cfg, *mesh: Counting())
    c = rl_config.get_config()
    c.rl.update(pool_size=4, groups_per_call=2, groups_per_batch=2)
    with open(tmp_path / "pool.json", "w") as f:
        json.dump({"order": list(range(4))}, f)
    os.makedirs(tmp_path / "weights")
    assert sampler_process.sampler_loop(c, str(tmp_path), 0) == 4
    out = capsys.readouterr().out
    assert out.count("10 tokens, acceptance 0.750, tokens_per_verify 2.500") == 2, out
    store = RolloutStore(str(tmp_path / "rollouts"))
    recs = [r for g in store.list()[:2] for r in store.get(g)]
    assert recs[0]["decode"] == {"drafted": 4.0, "accepted": 3.0, "slot_steps": 2.0, "tokens": 5.0}
    stats = {"staleness": [0, 0], "zero_signal": 0}
    sync = {"bytes": 0, "seconds": 0.0, "full_bytes": 1}
    m = step_metrics(recs, stats, {}, sync, dt=1.0)
    assert m["spec/acceptance"] == 0.75 and m["spec/tokens_per_verify"] == 2.5
