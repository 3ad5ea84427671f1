"""Training records -> the padded training batch the RL loss consumes (host-side numpy).

A record (rl/episodes/records.py: per-token tokens, mask, logprobs, versions, experts,
malformed_mask, plus 'reward' and 'group_id') is token-exact over the whole transcript.

The training forward runs on tokens[:-1] and predicts tokens[1:] (targets): position t's loss is
on token t+1, so loss_mask/sampler_logprobs/advantages are the record's fields shifted by one.
Rows are padded to a fixed row count and to a length from a short ladder (row_length: a few
compiled steps, not one per batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rl.learning.grpo import chain_advantages


def summary_entropy_bonus(records: Sequence[dict], beta: float) -> np.ndarray:
    """Per record, beta x (its summary's surprisal - the mean surprisal of its group's summaries
    at the same segment index), for records that hand a summary to a next segment (segment <
    segments - 1); 0 for the others (a chain's last segment, a record without `segment`).
    Surprisal = -sum of the sampler's logprobs over the record's policy tokens = -log pi(summary).

    Why: grad E[-log pi(s)] = E[grad log pi(s) (-log pi(s) - c)] for any constant c (the mean of
    grad log pi is 0), so adding this to the summary segment's advantage is a REINFORCE estimate
    of beta x grad H(summary | its prompt): an entropy bonus on the sender only (max-entropy RL:
    the summary's reward is r + beta x -log pi(s)). The group mean (c) is the usual baseline. In
    summary_toy a fact whose summary collided with another fact's kept a summary on which the
    answer sometimes named it, and its sender turned deterministic there within ~30 steps (GRPO
    pushed every other summary down, since the answer named the fact nowhere else): zero
    exploration, no escape (bench/RESULTS_LOG.md, issue 55). The answer segment gets no bonus:
    it should turn deterministic."""
    out = np.zeros(len(records), np.float32)
    if not beta:
        return out
    keys, surprisal = {}, {}
    for i, r in enumerate(records):
        if "segment" in r and r["segment"] < r.get("segments", 1) - 1:
            lp = np.asarray(r["logprobs"], np.float64) * (np.asarray(r["mask"]) > 0)
            surprisal[i] = -float(lp.sum())
            keys.setdefault((r["group_id"], r["segment"]), []).append(i)
    for idx in keys.values():
        mean = np.mean([surprisal[i] for i in idx])
        for i in idx:
            out[i] = beta * (surprisal[i] - mean)
    return out


def sender_advantages(records: Sequence[dict], adv: np.ndarray) -> np.ndarray:
    """adv with every record that carries `sender_reward` (a summary segment's expected reward:
    rl/sampling/summary_toy.py answer_expectation) given sender_reward - the mean of it over its
    group's records at the same segment index instead of its chain's advantage; the other records
    (the answer segments, every other task's) keep adv. Why: the sampled 0/1 answer ties ~40% of
    a stalled summary_toy run's groups (zero advantage) and its noise hides which summary the
    receiver reads best; the expectation has the sender's gradient in expectation (E[sender_reward
    | summary] = E[reward | summary]) and no answer-sampling noise (bench/RESULTS.md, issue 55).
    A group where some summary records have it and others not is an error."""
    out = np.array(adv, np.float32)
    keys: dict = {}
    for i, r in enumerate(records):
        if r.get("segment", 0) < r.get("segments", 1) - 1:  # hands a summary on
            keys.setdefault((r["group_id"], r["segment"]), []).append(i)
    for key, idx in keys.items():
        have = ["sender_reward" in records[i] for i in idx]
        if not any(have):
            continue
        if not all(have):
            raise ValueError(f"group {key[0]} segment {key[1]}: sender_reward on some chains only")
        x = np.asarray([float(records[i]["sender_reward"]) for i in idx], np.float64)
        out[idx] = (x - x.mean()).astype(np.float32)
    return out


SHORTEST_ROW = 256  # row_length's floor: below it a step is cheap anyway, and fewer programs


def row_length(
    records: Sequence[dict], max_tokens: int, *, multiple: int = 1, shortest: int = SHORTEST_ROW
) -> int:
    """The row length T of a batch of `records`: the shortest of max_tokens, max_tokens / 2,
    max_tokens / 4, .. that holds every record's forward positions (len(tokens) - 1), is a
    multiple of `multiple` (context parallelism's 2 x context) and is >= `shortest` (max_tokens
    itself when that is shorter). A function of the records alone, so every host collating the
    same records gets the same T.

    Why: the loss is normalized by the configured max_tokens, not by T (rl/learning/grpo.py), so
    padding changes nothing but the cost; episodes far shorter than their budget (bench_rl_repos'
    first run: 232-288 of 4,096 tokens) otherwise spend most of a step on padding. The ladder
    keeps the number of compiled steps at log2(max_tokens / shortest) + 1."""
    need = max((len(r["tokens"]) - 1 for r in records), default=1)
    length = max_tokens
    while length % 2 == 0:
        half = length // 2
        if half < max(need, shortest) or half % multiple:
            break
        length = half
    return length


def collate(
    records: Sequence[dict],
    *,
    seq_len: int,
    rows: int,
    n_moe_layers: int,
    k: int,
    malformed_adv: float = 0.0,
    negative_scale: float = 1.0,
    summary_entropy: float = 0.0,
) -> dict:
    """-> batch dict of numpy arrays [rows, seq_len] (+ forced_experts [rows, n, seq_len, k]).

    Each record (one segment of a chain: rl/episodes/records.py) is one row; advantages are per
    chain (rl.learning.grpo.chain_advantages), but a summary record with `sender_reward` gets its
    own (sender_advantages). Padding rows have loss_mask 0 and segment id 0. A
    record longer than seq_len + 1 tokens is an error (the caller sizes seq_len from the episode
    token budget). A negative episode advantage is multiplied by `negative_scale` (1 = plain GRPO;
    see configs/rl.py). Tokens of malformed turns then get advantage min(A_i, -malformed_adv)
    (broken tool calls are negative examples). `summary_entropy` > 0 adds summary_entropy_bonus
    to the advantage of segments that hand a summary on (after the negative scaling: the bonus is
    not a reward outcome).
    Tokens before a record's `shared_prefix` (best-of-K from a shared prefix) get loss_mask 0."""
    if len(records) > rows:
        raise ValueError(f"collate: {len(records)} episodes > {rows} batch rows")
    if not 0.0 <= negative_scale <= 1.0:
        raise ValueError(f"negative_scale must be in [0, 1], got {negative_scale}")
    adv = sender_advantages(records, chain_advantages(records))
    adv = np.where(adv < 0, adv * np.float32(negative_scale), adv)
    adv = adv + summary_entropy_bonus(records, summary_entropy)
    index = {}
    for r in records:
        index.setdefault(r["group_id"], len(index))
    b = {
        "tokens": np.zeros((rows, seq_len), np.int32),
        "targets": np.zeros((rows, seq_len), np.int32),
        "positions": np.zeros((rows, seq_len), np.int32),
        "segment_ids": np.zeros((rows, seq_len), np.int32),
        "loss_mask": np.zeros((rows, seq_len), np.float32),
        "sampler_logprobs": np.zeros((rows, seq_len), np.float32),
        "advantages": np.zeros((rows, seq_len), np.float32),
        "group_ids": np.full((rows,), -1, np.int32),
        "forced_experts": np.zeros((rows, n_moe_layers, seq_len, k), np.int32),
    }
    for i, rec in enumerate(records):
        tok = np.asarray(rec["tokens"], np.int32)
        n = len(tok) - 1  # forward positions
        if n < 1 or n > seq_len:
            raise ValueError(
                f"episode {i} (group {rec['group_id']}): {len(tok)} tokens; need 2..{seq_len + 1}"
            )
        b["tokens"][i, :n] = tok[:-1]
        b["targets"][i, :n] = tok[1:]
        b["positions"][i, :n] = np.arange(n)
        b["segment_ids"][i, :n] = 1
        mask = np.array(rec["mask"], np.float32)[1:]  # a copy: the record stays as it is
        # a branched group's shared prefix (rl/sampling/rollout.py prefix_turns) is in no loss term:
        # the same in all K records, its advantage-weighted terms carry no signal (they sum to 0)
        mask[: max(rec.get("shared_prefix", 0) - 1, 0)] = 0.0  # mask[j] is token j + 1's
        b["loss_mask"][i, :n] = mask
        b["sampler_logprobs"][i, :n] = np.asarray(rec["logprobs"], np.float32)[1:] * mask
        a = np.full(n, adv[i], np.float32)
        if "malformed_mask" in rec:
            bad = np.asarray(rec["malformed_mask"], bool)[1:]
            a = np.where(bad, np.minimum(a, -malformed_adv), a)
        b["advantages"][i, :n] = a * mask
        b["group_ids"][i] = index[rec["group_id"]]
        if n_moe_layers:
            ex = np.asarray(rec["experts"], np.int32)  # [n, L, k]
            b["forced_experts"][i, :, :n] = ex[:, :n]
    return b
