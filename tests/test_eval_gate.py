"""Evaluation every N steps inside a loop: TensorBoard scalars, and Orbax keeping the best params by
a metric. The evaluate function is a stand-in (this tests the gating mechanics, not a suite)."""

import glob
import os

import jax.numpy as jnp
import numpy as np
import pytest

from eval.gate import BestCheckpoints, maybe_evaluate
from train.tensorboard import SummaryWriter, read_scalars

NLL = {10: 3.0, 20: 2.0, 30: 2.5, 40: 2.2}  # step -> the stand-in's metric


def _loop(tmp_path, mode):
    keeper = BestCheckpoints(str(tmp_path / f"best_{mode}"), metric="nll", mode=mode, keep=1)
    writer = SummaryWriter(str(tmp_path / f"tb_{mode}"))
    evaluated = []
    for step in range(1, 41):
        params = {"w": jnp.full((2, 3), float(step))}

        def evaluate(p):
            evaluated.append(int(p["w"][0, 0]))
            return {"nll": NLL[int(p["w"][0, 0])], "bits_per_byte": 1.0}

        maybe_evaluate(step, params, evaluate, every=10, writer=writer, keeper=keeper, log=str)
    writer.close()
    return keeper, evaluated


@pytest.mark.parametrize("mode,best", [("min", 20), ("max", 10)])
def test_keeps_best_by_metric(tmp_path, mode, best):
    keeper, evaluated = _loop(tmp_path, mode)
    assert evaluated == [10, 20, 30, 40]
    assert keeper.best_step() == best
    assert keeper.all_steps() == [best]  # Orbax deleted the others (keep=1)
    restored = keeper.restore_best({"w": jnp.zeros((2, 3))})
    np.testing.assert_array_equal(np.asarray(restored["w"]), np.full((2, 3), float(best)))
    (events,) = glob.glob(os.path.join(tmp_path, f"tb_{mode}", "events.out.tfevents.*"))
    nll = [(s, v) for s, tag, v in read_scalars(events) if tag == "eval/nll"]
    assert nll == [(s, pytest.approx(NLL[s], rel=1e-6)) for s in (10, 20, 30, 40)]  # float32
    keeper.close()


def test_missing_metric_and_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        BestCheckpoints(str(tmp_path / "b"), metric="nll", mode="lowest")
    keeper = BestCheckpoints(str(tmp_path / "c"), metric="nll")
    with pytest.raises(KeyError, match="nll"):
        keeper.save(1, {"w": jnp.zeros(2)}, {"loss": 1.0})
    keeper.close()
