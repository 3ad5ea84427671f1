"""User feedback on served responses -> RL records (rl/episodes/records.py).

The interaction log (rl/serve/interaction_log.py) holds each served exchange token-exact
(prompt + completion ids, the sampler's log-probs, params version per token, routed experts)
and the signals users attach to it. A cycle (rl/serve/realtime.py) reads the signals that arrived
since its cursor, joins each to its exchange (wherever in the log it is) and maps it to a reward.

Reward mapping (rl/episodes/rewards.py `feedback_reward`, the one rewards module;
configs/realtime.py `realtime.reward`, each value configurable):
    accepted       +1.0   the user kept the response as is
    rejected       -1.0   the user discarded it
    dissatisfied   -0.5   a follow-up said it was not what they wanted
    edited         edited_min + (edited_max - edited_min) * similarity(response, final_text):
                   difflib's ratio of the two texts, so an edit that kept most of the response
                   scores near `edited_max` (+0.5) and a rewrite near `edited_min` (-0.5)
    rating         (rating - 3) / 2: ratings 1..5 map linearly onto [-1, 1]
Several signals for one response: the latest one counts (an edit after an accept, say).

Staleness rule (the bound: rl/learning/staleness.py): a response whose oldest completion token
came from params version v is trained when base_version - v <= realtime.max_staleness (its
importance ratio against the base params is the loss's truncated importance weight,
rl/learning/grpo.py TIS with rl.tis_c, computed from the logged sampler log-probs), and dropped
(counted in `stale`) otherwise. A response longer than rl.max_tokens + 1 tokens is dropped
(counted in `too_long`); a signal for an id the log does not hold is counted in `orphan`.

Poisoning guard (Composer 2 trains on real users' signals: one user's flood of thumbs-up must not
steer the next checkpoint). Every signal carries the API key id that sent it (rl/serve/app.py
takes feedback only from the key that received the response). A cycle's window keeps at most
`key_cap` signals per key: the largest c with c <= realtime.max_key_share * (the window's size
once every key is cut to c), so no key holds more than that share of what is trained; a key over
it keeps its latest c signals, the rest counted in `capped`. With share s the window needs at
least 1/s keys to train at all (one key alone is capped to nothing). Signals without a key id
(logs written before keys) count as one key. Within the cycle, FeedbackSource (realtime.py)
also caps each key's rows per batch (realtime.batch_key_share).
"""

from __future__ import annotations

import numpy as np

from rl.episodes.records import completion_record, from_json, policy_tokens
from rl.episodes.rewards import feedback_reward
from rl.learning.grpo import group_advantages
from rl.learning.staleness import staleness, too_stale
from rl.serve.interaction_log import exchange_key, feedback_key, read_log


def read_signals(log_dir: str, cursor: dict, end: dict):
    """-> ({(id, choice): exchange}, {(response id, choice): latest feedback}) with feedback
    positions in [cursor, end): what arrived since the last cycle and before this one began.
    A response of n choices is n exchanges under one id, each addressed by its choice index."""
    exchanges, latest = {}, {}
    for (name, offset), rec in read_log(log_dir):
        if rec.get("kind") == "exchange":
            exchanges[exchange_key(rec)] = rec
        elif cursor.get(name, 0) <= offset < end.get(name, -1):
            latest.pop(feedback_key(rec), None)  # ordered by each one's latest signal
            latest[feedback_key(rec)] = rec
    return exchanges, latest


def key_cap(counts: list[int], share: float) -> int:
    """The most signals one key may keep: the largest c with c <= share * sum(min(n, c)) over
    the keys' counts n. share * sum(min(n, c)) - c is concave in c and 0 at c = 0, so the c that
    satisfy it are 0..c*: scanning up to the largest count finds c*. share >= 1: no cap."""
    if share >= 1 or not counts:
        return max(counts, default=0)
    best = 0
    for c in range(1, max(counts) + 1):
        if c <= share * sum(min(n, c) for n in counts):
            best = c
    return best


def cap_keys(records: list[dict], share: float) -> tuple[list[dict], int]:
    """records (oldest signal first) with each key's cut to key_cap's latest; -> (kept, dropped)."""
    by_key: dict = {}
    for r in records:
        by_key.setdefault(r["key_id"], []).append(r)
    cap = key_cap([len(v) for v in by_key.values()], share)
    keep = {id(r) for v in by_key.values() for r in v[max(0, len(v) - cap) :]} if cap else set()
    kept = [r for r in records if id(r) in keep]
    return kept, len(records) - len(kept)


def served_record(ex: dict) -> dict:
    """An exchange's RL record as rl/serve/app.py logs it (rl.episodes.records.completion_record).
    Logs written before 2026-11-28 hold the per-token layout over prompt + completion without the
    record's fields (no `mask`): those are rebuilt, so a log already written stays trainable."""
    if "mask" in ex:
        return from_json(ex)
    plen, tokens = ex["prompt_len"], ex["tokens"]
    experts = np.asarray(ex["experts"], np.int32).reshape(len(ex["experts"]), len(tokens), -1)
    return completion_record(
        tokens[:plen],
        tokens[plen:],
        ex["logprobs"][plen:],  # the old log holds the prompt's as 0.0 / -1
        ex["versions"][plen:],
        experts,
        group_id=ex["id"],
        reward=None,
        reward_terms=None,
    )


def training_records(log_dir, cursor, end, *, base_version, rt, max_tokens):
    """-> (records for rl/learning/batch.py's collate, stats). rt: the realtime block."""
    exchanges, latest = read_signals(log_dir, cursor, end)
    stats = dict(signals=len(latest), orphan=0, stale=0, too_long=0, capped=0, by_signal={})
    records = []
    for key, fb in latest.items():
        ex = exchanges.get(key)
        rid = key[0] if key[1] == 0 else f"{key[0]}/{key[1]}"  # unique per choice
        if ex is None:
            stats["orphan"] += 1
            continue
        rec = served_record(ex)  # reward still None
        versions = rec["versions"][rec["mask"] == 1]  # the completion's
        oldest = int(versions.min()) if versions.size else base_version
        if too_stale(base_version, oldest, rt.max_staleness):
            stats["stale"] += 1
            continue
        if len(rec["tokens"]) > max_tokens + 1 or policy_tokens(rec) < 1:
            stats["too_long"] += 1
            continue
        reward = feedback_reward(fb, ex.get("completion_text", ""), rt.reward)
        records.append(
            dict(
                rec,
                id=rid,
                reward=reward,
                reward_terms={"outcome": reward},  # the user's signal is the whole reward
                group_id="cycle",
                staleness=staleness(base_version, oldest),
                key_id=fb.get("key_id"),  # who sent the signal (the guard's unit)
                signal=fb["signal"],
            )
        )
    records, stats["capped"] = cap_keys(records, rt.max_key_share)
    for r in records:
        stats["by_signal"][r["signal"]] = stats["by_signal"].get(r["signal"], 0) + 1
    stats["by_key"] = {}
    for r in records:
        stats["by_key"][str(r["key_id"])] = stats["by_key"].get(str(r["key_id"]), 0) + 1
    return records, stats


def advantages(rewards, baseline: str) -> np.ndarray:
    """'cycle': r - mean(r) over the cycle's responses (GRPO's baseline with the cycle as the
    group; no std division); 'none': r itself (the mapping is already centred on 0)."""
    r = np.asarray(rewards, np.float32)
    if baseline == "cycle":  # the cycle is one group
        return group_advantages(r, np.zeros(len(r), np.int32))
    if baseline == "none":
        return r
    raise ValueError(f"realtime.baseline={baseline!r}: expected 'cycle' or 'none'")
