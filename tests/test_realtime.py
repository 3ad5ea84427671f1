"""The real-time cycle end to end on the tiny preset (rl/serve/realtime.py): serve (real uvicorn,
the `openai` client) -> scripted users rate responses by how much ASCII they hold -> one cycle
trains on the logged exchanges with the one trainer and RL loss, passes the eval gate, is
published as promoted, and the server swaps to it; the promoted model puts more mass on ASCII.
A second cycle whose candidate regresses on held-out NLL (a deliberately huge learning rate) is
refused and the server keeps serving the promoted version. Also the reward mapping and gates."""

from __future__ import annotations

import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import openai
import pytest

from configs import realtime as realtime_config
from configs import serve as serve_config
from data.tokenizers import ByteTokenizer
from eval.promotion import gate_check, no_regression, parse_gates, suite_metrics
from model import Transformer
from model.export import load_params, save_params
from rl.episodes.records import check_record, completion_record, to_json
from rl.episodes.rewards import feedback_reward
from rl.serve import feedback as fbk
from rl.serve.app import make_app
from rl.serve.follow import PromotedFollower
from rl.serve.interaction_log import InteractionLog, end_positions, read_log
from rl.serve.realtime import run_cycle
from rl.serve.server import build, start_http
from rl.stores.weight_store import Promotions

TOK = ByteTokenizer()
MODEL = "composer-tiny"


def cycle_config(base_dir: str, lr: float, guard: bool = True):
    """guard=False: one user (the open server's signals share one key id) may train alone."""
    c = realtime_config.get_config()
    if not guard:
        c.realtime.update(max_key_share=1.0, batch_key_share=1.0)
    c.realtime.params = base_dir
    c.realtime.gates = "nll/nll@32:min:1.0"
    c.realtime.epochs = 4
    c.rl.max_tokens = 32
    c.train.update(batch_size=8, lr=lr, log_every=100)
    c.eval.nll.update(context_lengths="32", batch_size=8, batches=2)
    return c


def cycle(config, workdir: str) -> dict:
    """One cycle, wired as main.py wires it (the eval suites and the gate come from eval/)."""
    check = gate_check(config.realtime.gates)
    return run_cycle(config, workdir, evaluate=suite_metrics, check=check, log=lambda _: None)


def ascii_share(ids) -> float:
    return float(np.mean([t < 128 for t in ids])) if ids else 0.0


@functools.partial(jax.jit, static_argnums=0)
def _forward(cfg, params, tokens):
    return Transformer(cfg).apply({"params": params}, tokens).logits


def behaviour(cfg, params, records) -> tuple[float, np.ndarray]:
    """(mean probability the model gives ASCII ids (< 128 of the 272 valid) at the positions that
    produced the logged completions, the behaviour the users favoured; [N] log-probs of the
    logged completions), teacher-forced."""
    # One forward over all records, right-padded to the longest (causal: padding after a
    # record cannot change its logits), one compiled shape instead of one per record length.
    width = max(len(r["tokens"]) for r in records)
    padded = np.zeros((len(records), width), np.int32)
    for i, r in enumerate(records):
        padded[i, : len(r["tokens"])] = r["tokens"]
    all_logits = _forward(cfg, params, jnp.asarray(padded))
    mass, logp = [], []
    for i, r in enumerate(records):
        plen, toks = r["prompt_len"], jnp.asarray(r["tokens"])
        logits = all_logits[i, plen - 1 : len(toks) - 1, : TOK.vocab_size]
        lp = jax.nn.log_softmax(logits, -1)
        mass.append(float(jnp.exp(lp[:, :128]).sum(-1).mean()))
        logp.append(float(jnp.take_along_axis(lp, toks[plen:, None], 1).sum()))
    return float(np.mean(mass)), np.asarray(logp)


def play(client, n: int, offset: int) -> list[str]:
    """n users one after another (so the sampled data, and the test, are deterministic: batching
    changes the draws); each rates its response 1..5 by its share of ASCII bytes."""

    def one(i):
        r = client.completions.create(model=MODEL, prompt=f"task {offset + i}:", max_tokens=8)
        ids = TOK.encode(r.choices[0].text)
        client.post(
            "/feedback",
            body={"response_id": r.id, "signal": "rating", "rating": 1 + 4 * ascii_share(ids)},
            cast_to=object,
        )
        return r.id

    return [one(i) for i in range(n)]


def served_version(server, want: int, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while server.loop.version != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.loop.version


def test_cycle_promotes_what_users_favour_and_refuses_a_regression(tmp_path, tiny_model):
    cfg, params = tiny_model
    base_dir, work = str(tmp_path / "base"), str(tmp_path / "work")
    save_params(base_dir, cfg, jax.device_get(params))
    cfg, params0 = load_params(base_dir)
    block = serve_config.get_config().serve
    block.update(model_name=MODEL, slots=8, cache_len=64, temperature=1.0, max_new_tokens=8,
                 stream_every=4, log_max_bytes=1 << 20, rate_per_s=0.0)  # fmt: skip
    server = build(block, cfg, params0, TOK, log_dir=os.path.join(work, "interactions"))
    server.loop.start()
    follower = PromotedFollower(os.path.join(work, "weights"), server.loop, poll_s=0.05).start()
    http, _, port = start_http(make_app(server), "127.0.0.1", 0)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
    try:
        ids = play(client, 32, 0)
        report = cycle(cycle_config(base_dir, lr=6e-3, guard=False), work)
        assert report["decision"] == "promoted", report["why"]
        assert report["data"]["signals"] == 32 and report["rewards"]["n"] == 32
        assert report["version"] == 1 and Promotions(os.path.join(work, "weights")).latest() == 1
        assert served_version(server, 1) == 1  # swapped in between decode steps
        with open(os.path.join(work, "realtime", "cycle_0000", "report.json")) as f:
            assert json.load(f)["decision"] == "promoted"
        log = list(read_log(os.path.join(work, "interactions")))
        logged = [r for _, r in log if r.get("id") in ids]
        ratings = {r["response_id"]: r["rating"] for _, r in log if r["kind"] == "feedback"}
        adv = np.asarray([(ratings[r["id"]] - 3) / 2 for r in logged])
        adv -= adv.mean()
        _, params1 = load_params(os.path.join(work, "realtime", "cycle_0000", "candidate"))
        (before, lp0), (after, lp1) = (
            behaviour(cfg, params0, logged),
            behaviour(cfg, params1, logged),
        )
        assert float(adv @ (lp1 - lp0)) > 0  # well-rated completions gained log-prob vs the rest
        assert after > before + 0.02, (before, after)  # measured 0.4692 -> 0.4987

        play(client, 8, 100)  # new signals for the next cycle, served by version 1
        bad = cycle(cycle_config(base_dir, lr=1.0, guard=False), work)
        assert bad["decision"] == "refused" and "nll/nll@32" in bad["why"]
        assert bad["base_version"] == 1 and bad["eval"]["deltas"]["nll/nll@32"] > 1.0
        assert Promotions(os.path.join(work, "weights")).latest() == 1
        time.sleep(0.3)  # a few follower polls: nothing new to swap to
        assert server.loop.version == 1
        r = client.completions.create(model=MODEL, prompt="still", max_tokens=4)
        assert r.model_extra["params_versions"] == [1]
    finally:
        http.should_exit = True
        follower.stop()
        server.loop.stop()


def test_reward_mapping():
    m = realtime_config.get_config().realtime.reward
    assert feedback_reward({"signal": "accepted"}, "", m) == 1.0
    assert feedback_reward({"signal": "rating", "rating": 1}, "", m) == -1.0
    kept = feedback_reward({"signal": "edited", "final_text": "abcd"}, "abcd", m)
    rewritten = feedback_reward({"signal": "edited", "final_text": "wxyz"}, "abcd", m)
    assert (kept, rewritten) == (0.5, -0.5)
    np.testing.assert_allclose(fbk.advantages([1.0, -1.0, 0.0], "cycle"), [1.0, -1.0, 0.0])
    with pytest.raises(ValueError, match="baseline"):
        fbk.advantages([1.0], "group")


def test_staleness_rule_orphans_and_cursor(tmp_path):
    """Hand-written log records (the loop's mechanics): a response 5 versions behind the base is
    dropped (max_staleness 4), one 4 behind is trained; feedback for an id the log lacks is
    counted; the latest signal for a response wins; the cursor excludes older feedback."""
    log = InteractionLog(str(tmp_path))

    def exchange(rid, version):  # 2 prompt + 1 completion token, as rl/serve/app.py logs it
        rec = completion_record([1, 2], [3], [-1.0], [version], [[[0, 1]] * 3], group_id=rid,
                                reward=None, reward_terms=None, kind="exchange", id=rid,
                                prompt_len=2, completion_text="x")  # fmt: skip
        log.append(to_json(rec))

    exchange("old", 1)
    exchange("ok", 2)
    log.append({"kind": "feedback", "response_id": "ok", "signal": "rejected"})
    cursor = end_positions(str(tmp_path))
    for rid in ("old", "ok", "ghost"):
        log.append({"kind": "feedback", "response_id": rid, "signal": "accepted"})
    rt = dict_rt(realtime_config.get_config().realtime, max_key_share=1.0)  # keyless: no guard
    records, stats = fbk.training_records(
        str(tmp_path), cursor, end_positions(str(tmp_path)), base_version=6, rt=rt, max_tokens=8
    )
    assert [r["id"] for r in records] == ["ok"] and records[0]["reward"] == 1.0
    assert (stats["stale"], stats["orphan"], stats["signals"]) == (1, 1, 3)
    assert records[0]["staleness"] == 4 and records[0]["mask"].tolist() == [0, 0, 1]
    # the one record form (rl/episodes/records.py): the reward RL trains on with its one part
    assert check_record(records[0])["reward_terms"] == {"outcome": 1.0}


def test_exchanges_logged_before_records_were_logged_whole_stay_trainable():
    """A log line in the layout the server wrote before 2026-11-28 (per-token lists over prompt +
    completion, no record fields) reads back as the record the server writes now."""
    rec = completion_record([1, 2], [3, 4], [-0.5, -1.5], [7, 8], np.arange(16).reshape(2, 4, 2),
                            group_id="r", reward=None, reward_terms=None)  # fmt: skip
    old = {"kind": "exchange", "id": "r", "choice": 0, "prompt_len": 2, "tokens": [1, 2, 3, 4],
           "logprobs": [0.0, 0.0, -0.5, -1.5], "versions": [-1, -1, 7, 8],
           "experts": np.arange(16).reshape(2, 4, 2).tolist(), "completion_text": "x"}  # fmt: skip
    got = fbk.served_record(old)
    assert sorted(got) == sorted(rec)
    for k, v in rec.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    assert fbk.served_record(to_json(dict(rec, kind="exchange"))).keys() >= rec.keys()


def test_promotion_gate_refuses_a_candidate_below_the_acceptance_floor(tiny_model):
    """Issue 44: spec/acceptance (eval/promotion.py spec_acceptance, MTP head 0's first-draft
    acceptance at the serving temperature) under a floor gate. The tiny model's random-init
    heads and main head are both spread out (acceptance 0.77 here); a candidate whose MTP head
    is 100x sharper in a random direction drafts what the verifier rejects (0.006): refused, the
    reason names the metric, and the base passes the same gate."""
    from eval.promotion import spec_acceptance

    cfg, params = tiny_model
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 256, size=(2, 32))
    batch = {
        "tokens": tokens,
        "positions": np.broadcast_to(np.arange(32), (2, 32)),
        "segment_ids": np.ones((2, 32), np.int32),
        "loss_mask": np.ones((2, 32), np.float32),
    }
    sharp = jax.tree_util.tree_map(lambda x: x, params)  # a copy of the dict nesting
    sharp["mtp_0"] = dict(
        sharp["mtp_0"], head_norm={"scale": params["mtp_0"]["head_norm"]["scale"] * 100}
    )
    base = {"spec/acceptance": spec_acceptance(cfg, params, [batch], 1.0, 256)}
    cand = {"spec/acceptance": spec_acceptance(cfg, sharp, [batch], 1.0, 256)}
    assert base["spec/acceptance"] > 0.7 and cand["spec/acceptance"] < 0.1, (base, cand)
    gates = parse_gates("spec/acceptance:floor:0.5")
    assert no_regression(base, base, gates)[0]
    ok, deltas, why = no_regression(base, cand, gates)
    assert not ok and "spec/acceptance" in why[0] and "below the floor 0.5" in why[0]
    assert deltas["spec/acceptance"] < -0.6
    assert not no_regression(base, {}, gates)[0]  # not measured: fail closed


def test_gates_fail_closed():
    gates = parse_gates("nll/nll@32:min:0.1,agentic/pass_rate:max:0")
    assert no_regression({"nll/nll@32": 2.0, "agentic/pass_rate": 0.5},
                         {"nll/nll@32": 2.05, "agentic/pass_rate": 0.5}, gates)[0]  # fmt: skip
    ok, _, why = no_regression({"nll/nll@32": 2.0}, {"nll/nll@32": 2.2}, gates)
    assert not ok and len(why) == 2  # nll regressed, pass_rate missing
    with pytest.raises(ValueError, match="tolerance"):
        parse_gates("nll:lower:1")


def _poison_logs(root: str) -> tuple[str, str]:
    """Two logs of the same 52 hand-written exchanges (3 per honest key h0..h3, 40 of a flooder
    F; the loop's mechanics, not the model's behaviour): 'flood' holds the honest keys' mixed
    signals then F's 'accepted' on all 40 of its responses (each posted twice: the second
    replaces the first); 'capped' holds the same honest signals and F's on its last 4 only.
    -> (flood workdir, capped workdir)."""
    rng = np.random.default_rng(0)
    keys = [f"h{i}" for i in range(4) for _ in range(3)] + ["F"] * 40
    exchanges = []
    for i, key in enumerate(keys):
        completion = [int(t) for t in rng.integers(32, 127, 6)]
        experts = rng.integers(0, 8, (1, 9, 2)).tolist()  # tiny: 1 MoE layer, top-2 of 8
        rec = completion_record([1, 40 + i % 50, 2], completion, [-1.5] * 6, [0] * 6, experts,
                                group_id=f"r{i}", reward=None, reward_terms=None,
                                kind="exchange", id=f"r{i}", choice=0, key_id=key, prompt_len=3,
                                completion_text=TOK.decode(completion))  # fmt: skip
        exchanges.append(to_json(rec))
    honest = [(f"r{i}", ["accepted", "rejected", "dissatisfied"][i % 3]) for i in range(12)]
    flood = [(f"r{i}", "accepted") for i in range(12, 52) for _ in range(2)]
    works = []
    for name, signals in [("flood", honest + flood), ("capped", honest + flood[-8:])]:
        work = os.path.join(root, name)
        log = InteractionLog(os.path.join(work, "interactions"))
        for ex in exchanges:
            log.append(ex)
        for j, (rid, signal) in enumerate(signals):
            log.append_signal({"kind": "feedback", "id": f"fb{j}", "response_id": rid, "choice": 0,
                               "signal": signal, "key_id": keys[int(rid[1:])]})  # fmt: skip
        log.close()
        works.append(work)
    return works[0], works[1]


@pytest.mark.slow  # two cycles (train + eval): 50-210 s measured at load 8-10
def test_one_key_flooding_positive_signals_moves_nothing_beyond_its_cap(tmp_path, tiny_model):
    """The poisoning guard (issue 54): F posts 80 'accepted' signals on its own 40 responses
    against 12 mixed signals of four honest keys. The window keeps F's latest 4 (key_cap: 4 <=
    0.25 * (12 + 4), 5 > 0.25 * 17), so F holds 25% of the cycle; every batch holds <= 2 of F's
    8 rows; and the cycle trains on exactly what it would have had F posted only those 4: the
    same records, the same batches, the same candidate and eval gate result. Without the guard
    F would hold 40 of 52 records and whole batches."""
    from rl.serve.realtime import FeedbackSource

    cfg, params = tiny_model
    flood, capped = _poison_logs(str(tmp_path))
    rt = cycle_config("", 6e-3).realtime  # the default guard: max_key_share 0.25
    reads = {}
    for name, work in (("flood", flood), ("capped", capped)):
        log_dir = os.path.join(work, "interactions")
        reads[name] = fbk.training_records(log_dir, {}, end_positions(log_dir), base_version=0,
                                           rt=rt, max_tokens=32)  # fmt: skip
    (recs, stats), (recs_c, stats_c) = reads["flood"], reads["capped"]
    assert fbk.key_cap([3, 3, 3, 3, 40], 0.25) == 4 and fbk.key_cap([40], 0.25) == 0
    assert fbk.key_cap([3, 3, 3, 3, 40], 1.0) == 40  # off
    assert stats["signals"] == 52 and stats["capped"] == 36 and stats["by_key"]["F"] == 4
    assert [r["id"] for r in recs] == [r["id"] for r in recs_c]
    assert [r["id"] for r in recs if r["key_id"] == "F"] == ["r48", "r49", "r50", "r51"]
    assert stats["by_signal"] == stats_c["by_signal"] == {"accepted": 8, "rejected": 4,
                                                           "dissatisfied": 4}  # fmt: skip

    def batches(records, share):
        src = FeedbackSource(records, np.zeros(len(records)), rows=8, seq_len=32, cfg=cfg,
                             epochs=1, seed=0, key_share=share)  # fmt: skip
        return [[records[i]["id"] for i in b] for b in src.batches]

    guarded = batches(recs, 0.25)
    assert guarded == batches(recs_c, 0.25)
    assert all(sum(rid in ("r48", "r49", "r50", "r51") for rid in b) <= 2 for b in guarded)
    off, _ = fbk.training_records(os.path.join(flood, "interactions"), {},
                                  end_positions(os.path.join(flood, "interactions")),
                                  base_version=0, rt=dict_rt(rt, max_key_share=1.0),
                                  max_tokens=32)  # fmt: skip
    unguarded = batches(off, 1.0)
    assert len(off) == 52 and max(sum(int(x[1:]) >= 12 for x in b) for b in unguarded) > 2

    base_dir = str(tmp_path / "base")
    save_params(base_dir, cfg, jax.device_get(params))
    # The promoting cycle's lr (6e-3, as above): one train-step program for both tests (the lr is
    # a constant of the compiled step), not a third one.
    reports = [cycle(cycle_config(base_dir, lr=6e-3), w) for w in (flood, capped)]
    assert [r["decision"] for r in reports] == ["promoted", "promoted"], reports[0]["why"]
    assert reports[0]["data"]["by_key"] == {"h0": 3, "h1": 3, "h2": 3, "h3": 3, "F": 4}
    assert reports[0]["eval"]["candidate"] == reports[1]["eval"]["candidate"]


def dict_rt(rt, **kw):
    out = rt.copy_and_resolve_references()
    out.update(kw)
    return out
