"""Promotion gate: is a candidate checkpoint no worse than the baseline on the gated metrics?

Pure (two metric dicts in, a decision out), for whatever promotes checkpoints (a real-time RL
cycle, a best-of-K selection). Keeping the best K checkpoints of one run by one metric is the
trainer's job: `config.eval_gate` (train/trainer.py, train.checkpoint.BestCheckpoints).

    ok, reasons = no_worse(candidate, baseline, {"eval/nll": "min", "pass@1": "max"}, 0.01)
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def no_worse(
    candidate: Mapping[str, float],
    baseline: Mapping[str, float],
    gated: Mapping[str, str],
    tolerance: float = 0.0,
) -> tuple[bool, list[str]]:
    """(True, []) when, for every metric in `gated` ('min': lower is better, 'max': higher is),
    the candidate is at most `tolerance` (absolute) worse than the baseline; else (False, one line
    per failing metric). A metric missing from either side, or not finite, fails (fail closed)."""
    if tolerance < 0:
        raise ValueError(f"tolerance={tolerance}: must be >= 0")
    reasons = []
    for name, mode in gated.items():
        if mode not in ("min", "max"):
            raise ValueError(f"gated metric {name!r}: mode {mode!r}, expected 'min' or 'max'")
        if name not in candidate or name not in baseline:
            side = "candidate" if name not in candidate else "baseline"
            reasons.append(f"{name}: missing from the {side}")
            continue
        new, old = float(candidate[name]), float(baseline[name])
        if not (math.isfinite(new) and math.isfinite(old)):
            reasons.append(f"{name}: not finite (candidate {new}, baseline {old})")
            continue
        worse_by = new - old if mode == "min" else old - new
        if worse_by > tolerance:
            reasons.append(
                f"{name}: {new:.6g} vs baseline {old:.6g} ({mode} is better), "
                f"worse by {worse_by:.3g} > tolerance {tolerance:g}"
            )
    return not reasons, reasons
