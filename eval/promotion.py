"""Promotion gate: is a candidate checkpoint no worse than the baseline on every gated metric?

    gates = parse_gates("nll/nll@128:min:0.02,agentic/pass_rate:max:0")
    ok, deltas, reasons = no_regression(baseline_metrics, candidate_metrics, gates)
    metrics = suite_metrics(config, export_dir, out_dir)   # the eval suites -> '<suite>/<metric>'

A gate is `<metric>:<min|max>:<tolerance>`: for 'min' metrics (lower is better) the candidate
regresses when candidate - baseline > tolerance, for 'max' metrics when baseline - candidate >
tolerance (absolute, in the metric's own units). A gated metric missing on either side is a
regression (fail closed: nothing is promoted on a metric nobody measured).
"""

from __future__ import annotations

import functools
import math


def parse_gates(text: str) -> dict[str, tuple[str, float]]:
    gates = {}
    for item in (s.strip() for s in text.split(",") if s.strip()):
        name, _, rest = item.rpartition(":")
        metric, _, mode = name.rpartition(":")
        try:
            tol = float(rest)
        except ValueError:
            tol = -1.0
        if not metric or mode not in ("min", "max") or not tol >= 0:
            raise ValueError(f"gate {item!r}: expected <metric>:<min|max>:<tolerance >= 0>")
        gates[metric] = (mode, tol)
    return gates


def no_regression(baseline: dict, candidate: dict, gates: dict[str, tuple[str, float]]):
    """-> (ok, {metric: candidate - baseline}, [one line per regressed metric])."""
    deltas, reasons = {}, []
    for metric, (mode, tol) in gates.items():
        b, c = baseline.get(metric), candidate.get(metric)
        if b is None or c is None or not (math.isfinite(float(c)) and math.isfinite(float(b))):
            reasons.append(f"{metric}: missing or non-finite (baseline {b}, candidate {c})")
            continue
        deltas[metric] = float(c) - float(b)
        worse = deltas[metric] if mode == "min" else -deltas[metric]
        if worse > tol:
            reasons.append(
                f"{metric} ({mode}): {float(b):.4g} -> {float(c):.4g} regresses by {worse:.4g} > "
                f"tolerance {tol:g}"
            )
    return not reasons, deltas, reasons


def suite_metrics(config, ckpt: str, out_root: str, log=print) -> dict:
    """config.eval.suites (eval/run.py) on one export -> {'<suite>/<metric>': value}; reports
    are written under out_root."""
    from data.tokenizers import load_tokenizer
    from eval.run import evaluate_checkpoint, names

    tok = load_tokenizer(config.data.tokenizer)
    reports = evaluate_checkpoint(ckpt, config, names(config.eval.suites), tok, out_root, log)
    return {f"{s}/{k}": float(v) for s, r in reports.items() for k, v in r["metrics"].items()}


def gate_check(text: str):
    """check(baseline, candidate) -> no_regression's result under the gates `text`."""
    return functools.partial(_check, gates=parse_gates(text))


def _check(baseline: dict, candidate: dict, *, gates):
    return no_regression(baseline, candidate, gates)
