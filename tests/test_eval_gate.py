"""The promotion gate (eval.promotion.no_regression, pure) and the trainer's best-K keeper
(train.checkpoint.BestCheckpoints; the keeper inside a tiny training run is tested in
tests/test_train_loop.py). Here the keeper's retention with stand-in metrics; < 5 s."""

import jax.numpy as jnp
import numpy as np
import pytest

from eval.promotion import no_regression, parse_gates
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


def test_no_regression_within_tolerance_on_every_gated_metric():
    gates = parse_gates("eval/nll:min:0.05,pass@1:max:0.05")
    base = {"eval/nll": 3.00, "pass@1": 0.50, "other": 1.0}
    assert no_regression(base, {"eval/nll": 3.00, "pass@1": 0.50}, gates)[::2] == (True, [])
    assert no_regression(base, {"eval/nll": 2.50, "pass@1": 0.70}, gates)[0]  # better on both
    assert no_regression(base, {"eval/nll": 3.04, "pass@1": 0.47}, gates)[0]  # within tolerance
    ok, deltas, reasons = no_regression(base, {"eval/nll": 3.10, "pass@1": 0.55}, gates)
    assert not ok and len(reasons) == 1 and reasons[0].startswith("eval/nll (min): 3 -> 3.1")
    assert abs(deltas["eval/nll"] - 0.10) < 1e-9 and abs(deltas["pass@1"] - 0.05) < 1e-9
    ok, _, reasons = no_regression(base, {"eval/nll": 3.0, "pass@1": 0.40}, gates)
    assert not ok and reasons[0].startswith("pass@1 (max)")  # higher is better: 0.10 worse
    # Fail closed: a missing or non-finite metric (either side) is never "no regression".
    assert not no_regression(base, {"eval/nll": 3.0}, gates)[0]
    assert not no_regression(base, {"eval/nll": float("nan"), "pass@1": 0.5}, gates)[0]
    assert not no_regression({**base, "pass@1": float("inf")}, base, gates)[0]
    with pytest.raises(ValueError, match="tolerance"):
        parse_gates("eval/nll:min:-1")
    with pytest.raises(ValueError, match="min.max"):
        parse_gates("eval/nll:lowest:0")
