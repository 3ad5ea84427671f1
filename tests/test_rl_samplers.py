"""The toy RL sampler with MTP speculative decoding (rl.speculative_k) on the real tiny preset:
greedy drafts + verify must give the plain sampler's episode records (tokens, main-model
log-probs, experts) exactly, since the recorded log-probs are what RL's importance ratio uses."""

import numpy as np

from configs import rl as rl_config
from rl import loop, sampler_process
from rl.weight_store import FixedWeights
from train import trainer


def _records(speculative_k: int):
    c = rl_config.get_config()
    c.rl.update(temperature=0.0, speculative_k=speculative_k, max_new_tokens=6)
    cfg = loop.model_config(c)
    sampler = sampler_process.make_sampler(c.rl, cfg)
    tasks = [sampler_process.make_task(c.rl, j) for j in range(2)]
    weights = FixedWeights(trainer.host_params(c, cfg))
    groups = sampler.play(tasks, weights, seed=3)
    return [r for group in groups for r in group], sampler.decode_stats


def test_speculative_sampler_records_equal_plain_at_temperature_0():
    (plain, plain_stats), (spec, spec_stats) = _records(0), _records(2)
    assert plain_stats["drafted"] == 0 and spec_stats["drafted"] > 0  # it did speculate
    assert len(plain) == len(spec) == 2 * rl_config.get_config().rl.group_size
    for a, b in zip(plain, spec, strict=True):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
        np.testing.assert_array_equal(a["mask"], b["mask"])
        np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=1e-5)
        np.testing.assert_array_equal(a["experts"], b["experts"])
        assert a["reward"] == b["reward"]
