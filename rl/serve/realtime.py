"""Real-time RL cycle: served interactions + user feedback -> one RL update -> eval gate ->
a promoted version in the weight store (which the server follows, rl/serve/follow.py).

    python main.py --mode=rl --config=configs/realtime.py --workdir=W    (one cycle; see the config)

A cycle, with its state in <workdir>/realtime/state.json (cycle number, the log cursor, the
base: the export dir, version and eval metrics of the newest promoted params):
  1. read the signals logged since the cursor (rl/serve/feedback.py: reward mapping, staleness
     rule);
  2. train the base on them with the one trainer (train/trainer.py) and RL's loss
     (rl/learning/grpo.py: truncated importance correction against the serving version's logged
     log-probs, router replay of the logged experts) through `FeedbackSource`, `realtime.epochs`
     passes;
  3. export the candidate and evaluate it (and the base, once) with the eval suites (eval/run.py);
  4. promote only if no gated metric regresses beyond its tolerance (eval/promotion.py): publish
     to the weight store (rl/stores/weight_store.py) and mark the version promoted (`Promotions`);
  5. write <workdir>/realtime/cycle_<n>/report.json: data used, reward statistics, eval deltas,
     the decision and why; advance the cursor (a refused cycle's signals are not retried).
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np

from rl.learning import batch as rb
from rl.serve import feedback as fbk
from rl.serve.interaction_log import end_positions
from train.trainer import BatchSource


def capped_batches(order: list[int], keys: list, rows: int, cap: int) -> list[list[int]]:
    """Record indices in `order` packed into batches of <= rows with <= cap of one key each:
    each batch takes, in order, every record whose key still has room; the rest wait for the
    next. A batch always takes the first waiting record, so this ends; when only one key is left
    its batches are short (cap rows) rather than over the cap."""
    batches, waiting = [], list(order)
    while waiting:
        batch, per_key, rest = [], {}, []
        for i in waiting:
            if len(batch) < rows and per_key.get(keys[i], 0) < cap:
                batch.append(i)
                per_key[keys[i]] = per_key.get(keys[i], 0) + 1
            else:
                rest.append(i)
        batches.append(batch)
        waiting = rest
    return batches


class FeedbackSource(BatchSource):
    """The trainer's batch source over one cycle's records: `epochs` passes in a seeded order,
    up to train.batch_size rows per step with at most max(1, floor(key_share * rows)) rows of one
    API key (the poisoning guard, rl/serve/feedback.py), advantages per rl/serve/feedback.py
    `advantages` (precomputed over the whole cycle, not per batch). The trainer's defaults
    (start, device_batch, close) are kept."""

    log_keys = ("reward/mean",)

    def __init__(self, records, adv, *, rows: int, seq_len: int, cfg, epochs: int, seed: int,
                 key_share: float = 1.0):  # fmt: skip
        self.records, self.adv, self.rows, self.seq_len, self.cfg = records, adv, rows, seq_len, cfg
        order = [int(i) for i in np.random.default_rng(seed).permutation(len(records))]
        keys = [r.get("key_id") for r in records]
        epoch = capped_batches(order, keys, rows, cap=max(1, int(key_share * rows)))
        self.batches = epoch * epochs  # every pass in the same seeded order
        self.next = 0  # the next batch

    def set_state(self, state) -> None:
        self.next = int(state["next"])

    def get_state(self):
        return {"next": self.next}

    def next_batch(self, step: int):
        del step
        if self.next >= len(self.batches):
            return None
        take = self.batches[self.next]
        self.next += 1
        recs = [self.records[i] for i in take]
        b = rb.collate(
            recs,
            seq_len=self.seq_len,
            rows=self.rows,
            n_moe_layers=self.cfg.num_moe_layers,
            k=self.cfg.num_experts_per_tok,
        )
        for row, i in enumerate(take):  # the cycle-wide advantage on every policy token
            b["advantages"][row] = self.adv[i] * b["loss_mask"][row]
        self.rewards = [r["reward"] for r in recs]
        return b

    def after_step(self, state, step, metrics):
        return {"reward/mean": float(np.mean(self.rewards)), "loss": float(metrics["loss"])}


# -- state


def _state_path(workdir: str) -> str:
    return os.path.join(workdir, "realtime", "state.json")


def load_state(config, workdir: str) -> dict:
    path = _state_path(workdir)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    rt = config.realtime
    return {"cycle": 0, "cursor": {}, "base_dir": rt.params, "base_version": rt.base_version}


def _write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)  # a killed cycle never leaves a half-written state


# -- the cycle


def _train(config, records, adv, base_dir: str, train_dir: str, log) -> tuple:
    """The one trainer from the base export on the cycle's records -> (model config, trained
    host params)."""
    from rl.learning.loop import build_run
    from train import trainer

    config = config.copy_and_resolve_references()
    config.init_params_from = base_dir
    config.train.steps = 0  # until the source ends
    run = build_run(config)
    source = FeedbackSource(
        records,
        adv,
        rows=config.train.batch_size,
        seq_len=config.rl.max_tokens,
        cfg=run.cfg,
        epochs=config.realtime.epochs,
        seed=config.rl.seed,
        key_share=config.realtime.batch_key_share,
    )
    state = trainer.train(config, train_dir, run=run, source=source, log=log)
    return run.cfg, jax.device_get(state.params)


def _publish(store: str, cfg_params, version: int, note: dict) -> None:
    from rl.stores.weight_store import Promotions, WeightWriter

    WeightWriter(store, dtype="float32").publish(cfg_params, version)
    Promotions(store).promote(version, note)


def _next_version(store: str, base_version: int) -> int:
    from rl.stores.weight_store import WeightReader

    latest = WeightReader(store).latest_version() if _store_exists(store) else None
    return max(base_version, -1 if latest is None else latest) + 1


def _store_exists(store: str) -> bool:
    return "://" in store or store.startswith("{") or os.path.isdir(store)


def reward_stats(records) -> dict:
    r = np.asarray([x["reward"] for x in records], np.float64)
    if not r.size:
        return {"n": 0}
    st = np.asarray([x["staleness"] for x in records])
    return dict(n=int(r.size), mean=float(r.mean()), std=float(r.std()), min=float(r.min()),
                max=float(r.max()), staleness_max=int(st.max()),
                staleness_mean=float(st.mean()))  # fmt: skip


def run_cycle(config, workdir: str, *, evaluate, check, log=print) -> dict:
    """One cycle (see the module docstring) -> its report (also written as JSON).
    evaluate(config, export dir, out dir, log) -> {metric: value} (eval/promotion.py
    `suite_metrics`: the eval suites); check(base metrics, candidate metrics) -> (ok, deltas,
    reasons) (eval/promotion.py `no_regression` with the parsed realtime.gates). Injected by
    main.py: rl/ imports nothing of eval/ (eval uses rl)."""
    from data.export_tokenizer import record_tokenizer
    from model.export import save_params
    from rl.serve.server import serve_paths

    rt, t0 = config.realtime, time.time()
    if not config.rl.valid_vocab:  # the server samples the tokenizer's ids only
        from data.tokenizers import load_tokenizer

        config = config.copy_and_resolve_references()
        config.rl.valid_vocab = load_tokenizer(config.data.tokenizer).vocab_size
    from model.errors import ConfigError

    state = load_state(config, workdir)
    if not state["base_dir"]:
        raise ConfigError("realtime.params: the served base export is not set (first cycle)")
    try:  # checked before any training
        fbk.advantages([], rt.baseline)
    except ValueError as e:
        raise ConfigError(f"realtime: {e}") from None
    log_dir, store = serve_paths(rt, workdir)
    n = state["cycle"]
    cycle_dir = os.path.join(workdir, "realtime", f"cycle_{n:04d}")
    end = end_positions(log_dir) if os.path.isdir(log_dir) else {}
    records, data = fbk.training_records(
        log_dir, state["cursor"], end, base_version=state["base_version"], rt=rt,
        max_tokens=config.rl.max_tokens,
    )  # fmt: skip
    report = dict(cycle=n, base_dir=state["base_dir"], base_version=state["base_version"],
                  data=data, rewards=reward_stats(records), baseline=rt.baseline)  # fmt: skip
    if len(records) < rt.min_records:
        report.update(
            decision="skipped",
            why=f"{len(records)} usable signals < realtime.min_records={rt.min_records}",
        )
        return _finish(report, state, end, workdir, cycle_dir, t0, log, advance=False)
    adv = fbk.advantages([r["reward"] for r in records], rt.baseline)
    cfg, params = _train(
        config, records, adv, state["base_dir"], os.path.join(cycle_dir, "train"), log
    )
    candidate = os.path.join(cycle_dir, "candidate")
    save_params(candidate, cfg, params)
    record_tokenizer(candidate, config.data.tokenizer)
    base_m = state.get("base_metrics") or evaluate(
        config, state["base_dir"], os.path.join(cycle_dir, "eval_base"), log
    )
    cand_m = evaluate(config, candidate, os.path.join(cycle_dir, "eval_candidate"), log)
    ok, deltas, reasons = check(base_m, cand_m)
    report.update(
        eval=dict(
            base=base_m,
            candidate=cand_m,
            deltas=deltas,
            gates=rt.gates,
        )
    )
    if ok:
        version = _next_version(store, state["base_version"])
        why = f"no gated metric regressed beyond its tolerance ({rt.gates})"
        _publish(store, params, version, {"cycle": n, "why": why})
        state.update(base_dir=candidate, base_version=version, base_metrics=cand_m)
        report.update(decision="promoted", version=version, why=why)
    else:
        state["base_metrics"] = base_m
        report.update(decision="refused", why="; ".join(reasons))
    return _finish(report, state, end, workdir, cycle_dir, t0, log, advance=True)


def _finish(report, state, end, workdir, cycle_dir, t0, log, *, advance: bool) -> dict:
    report["wall_s"] = time.time() - t0
    _write_json(os.path.join(cycle_dir, "report.json"), report)
    if advance:
        state.update(cycle=state["cycle"] + 1, cursor=end)
    _write_json(_state_path(workdir), state)
    log(f"realtime cycle {report['cycle']}: {report['decision']} ({report['why']})")
    return report


def main(config, workdir: str, *, evaluate, check) -> None:
    """--mode=rl with configs/realtime.py: one cycle (run it on a schedule, e.g. every 5 hours)."""
    run_cycle(config, workdir, evaluate=evaluate, check=check)
