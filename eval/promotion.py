"""Promotion gate: is a candidate checkpoint no worse than the baseline on every gated metric?

    gates = parse_gates("nll/nll@128:min:0.02,agentic/pass_rate:max:0")
    ok, deltas, reasons = no_regression(baseline_metrics, candidate_metrics, gates)
    metrics = suite_metrics(config, export_dir, out_dir)   # the eval suites -> '<suite>/<metric>'

A gate is `<metric>:<min|max>:<tolerance>`: for 'min' metrics (lower is better) the candidate
regresses when candidate - baseline > tolerance, for 'max' metrics when baseline - candidate >
tolerance (absolute, in the metric's own units). A gated metric missing on either side is a
regression (fail closed: nothing is promoted on a metric nobody measured).

`<metric>:floor:<value>` is an absolute floor: the candidate fails when its metric is below
value (or missing), whatever the baseline's. configs/realtime.py gates `spec/acceptance` so:
the speculative acceptance the server would see (suite_metrics measures it for a model with MTP
heads, `spec_acceptance`), so a candidate whose drafts the verifier would mostly reject, and
that would serve slower, is refused, not promoted silently.
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
        if not metric or mode not in ("min", "max", "floor") or not tol >= 0:
            raise ValueError(
                f"gate {item!r}: expected <metric>:<min|max>:<tolerance >= 0> or "
                "<metric>:floor:<value >= 0>"
            )
        gates[metric] = (mode, tol)
    return gates


def no_regression(baseline: dict, candidate: dict, gates: dict[str, tuple[str, float]]):
    """-> (ok, {metric: candidate - baseline}, [one line per regressed metric])."""
    deltas, reasons = {}, []
    for metric, (mode, tol) in gates.items():
        b, c = baseline.get(metric), candidate.get(metric)
        if mode == "floor":  # absolute: the candidate alone
            if c is None or not math.isfinite(float(c)) or float(c) < tol:
                reasons.append(f"{metric}: candidate {c} below the floor {tol:g}")
            if c is not None and b is not None:
                deltas[metric] = float(c) - float(b)
            continue
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
    are written under out_root. A model with MTP heads also gets `spec/acceptance`
    (spec_acceptance on the nll suite's held-out batches, at rl.temperature) unless the config's
    realtime.gates do not read it (then no forward is spent on it)."""
    from data.tokenizers import load_tokenizer
    from eval.run import evaluate_checkpoint, names

    tok = load_tokenizer(config.data.tokenizer)
    reports = evaluate_checkpoint(ckpt, config, names(config.eval.suites), tok, out_root, log)
    out = {f"{s}/{k}": float(v) for s, r in reports.items() for k, v in r["metrics"].items()}
    gates = config.realtime.gates if "realtime" in config else "spec/acceptance"
    if "spec/acceptance" in gates:
        out.update(acceptance_metrics(config, ckpt, tok.vocab_size))
    return out


def acceptance_metrics(config, ckpt: str, valid_vocab: int = 0) -> dict:
    """{'spec/acceptance': value} for an export with MTP heads ({} without): on the held-out
    batches the nll suite reads at its first context length (eval/nll.py)."""
    from eval.nll import held_out_batches, resolve_shape
    from eval.run import _data_config, ints
    from model.export import load_params

    cfg, params = load_params(ckpt)
    if not cfg.num_mtp_modules:
        return {}
    data_config = _data_config(config)
    e = config.eval.nll
    lengths, batch_size, num_batches = resolve_shape(
        ints(e.context_lengths), e.batch_size, e.batches, data_config.train
    )
    batches = held_out_batches(data_config, cfg.vocab_size, lengths[0], batch_size, num_batches)
    temperature = config.rl.temperature if "rl" in config else 1.0
    return {"spec/acceptance": spec_acceptance(cfg, params, batches, temperature, valid_vocab)}


def spec_acceptance(cfg, params, batches, temperature: float = 1.0, valid_vocab: int = 0) -> float:
    """Speculative acceptance of MTP head 0's drafts on `batches` (token batches with loss_mask,
    positions, segment_ids): the mean over target tokens of sum_x min(p(x), q(x)), p the main
    head's next-token distribution one position on and q the head's, at `temperature` over ids
    < valid_vocab (0: all). That is the probability model/sampling.py's rule accepts a first
    draft sampled from q (at temperature 0 the engine accepts iff the argmaxes agree): the rate
    model/engine/'s counters measure when it decodes the same text."""
    import jax

    sums = _acceptance_sums(cfg, float(temperature), int(valid_vocab))
    acc = n = 0.0
    for b in batches:
        a, m = jax.device_get(sums(params, b))
        acc, n = acc + float(a), n + float(m)
    return acc / max(n, 1.0)


def gate_check(text: str):
    """check(baseline, candidate) -> no_regression's result under the gates `text`."""
    return functools.partial(_check, gates=parse_gates(text))


def _check(baseline: dict, candidate: dict, *, gates):
    return no_regression(baseline, candidate, gates)


@functools.cache
def _acceptance_sums(cfg, temperature: float, valid_vocab: int):
    """Jitted (params, batch) -> (sum of head 0's acceptance probabilities, tokens), one per
    model config (a cycle evaluates the base and the candidate with the same program)."""
    import jax
    import jax.numpy as jnp

    from model.transformer import Transformer
    from rl.learning.losses import mtp_distillation

    module = Transformer(cfg)

    @jax.jit
    def sums(params, b):
        out = module.apply(
            {"params": params}, b["tokens"], positions=b["positions"], segment_ids=b["segment_ids"]
        )
        mask = jnp.asarray(b["loss_mask"], jnp.float32)
        _, _, acc, n = mtp_distillation(
            out.mtp_logits, out.logits, mask, b["segment_ids"], temperature, valid_vocab
        )
        return acc, n

    return sums
