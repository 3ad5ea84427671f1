"""The promotion gate (eval.gate.no_worse, pure) and the trainer's best-K keeper
(train.checkpoint.BestCheckpoints; the keeper inside a tiny training run is tested in
tests/test_train_loop.py). Here the keeper's retention with stand-in metrics; < 5 s."""

import jax.numpy as jnp
import numpy as np
import pytest

from eval.gate import no_worse
from train.checkpoint import BestCheckpoints

NLL = {10: 3.0, 20: 2.0, 30: 2.5, 40: 2.2}  # step -> a stand-in metric


@pytest.mark.parametrize("mode,best", [("min", 20), ("max", 10)])
def test_keeps_best_by_metric(tmp_path, mode, best):
    keeper = BestCheckpoints(str(tmp_path / f"best_{mode}"), metric="nll", mode=mode, keep=1)
    for step, nll in NLL.items():
        keeper.save(step, {"w": jnp.full((2, 3), float(step))}, {"nll": nll, "bpb": 1.0})
    assert keeper.best_step() == best
    assert keeper.all_steps() == [best]  # Orbax deleted the others (keep=1)
    assert not keeper.save(best, {"w": jnp.zeros((2, 3))}, {"nll": 0.0})  # judged already
    restored = keeper.restore_best({"w": jnp.zeros((2, 3))})
    np.testing.assert_array_equal(np.asarray(restored["w"]), np.full((2, 3), float(best)))
    keeper.close()


def test_missing_metric_and_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        BestCheckpoints(str(tmp_path / "b"), metric="nll", mode="lowest")
    keeper = BestCheckpoints(str(tmp_path / "c"), metric="nll")
    with pytest.raises(KeyError, match="nll"):
        keeper.save(1, {"w": jnp.zeros(2)}, {"loss": 1.0})
    keeper.close()


def test_no_worse_within_tolerance_on_every_gated_metric():
    gated = {"eval/nll": "min", "pass@1": "max"}
    base = {"eval/nll": 3.00, "pass@1": 0.50, "other": 1.0}
    assert no_worse({"eval/nll": 3.00, "pass@1": 0.50}, base, gated) == (True, [])
    assert no_worse({"eval/nll": 2.50, "pass@1": 0.70}, base, gated)[0]  # better on both
    assert no_worse({"eval/nll": 3.04, "pass@1": 0.47}, base, gated, tolerance=0.05)[0]
    ok, reasons = no_worse({"eval/nll": 3.10, "pass@1": 0.55}, base, gated, tolerance=0.05)
    assert not ok and len(reasons) == 1 and reasons[0].startswith("eval/nll: 3.1 vs baseline 3")
    ok, reasons = no_worse({"eval/nll": 3.0, "pass@1": 0.40}, base, gated, tolerance=0.05)
    assert not ok and reasons[0].startswith("pass@1:")  # higher is better: 0.10 worse
    # Fail closed: a missing or non-finite metric is never "no worse".
    assert no_worse({"eval/nll": 3.0}, base, gated)[1] == ["pass@1: missing from the candidate"]
    assert not no_worse({"eval/nll": float("nan"), "pass@1": 0.5}, base, gated)[0]
    with pytest.raises(ValueError, match="tolerance"):
        no_worse(base, base, gated, tolerance=-1)
    with pytest.raises(ValueError, match="'lowest'"):
        no_worse(base, base, {"eval/nll": "lowest"})
