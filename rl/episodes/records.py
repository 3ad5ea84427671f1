"""Episode records: one episode (or one segment of a chain), token-exact, with everything RL
needs per token and the reward RL trains on.

One form: a record is a plain dict with the fields below, whoever made it (the multi-turn driver
rl/sampling/rollout.py, the single-turn samplers, the server: each served choice is logged as a
record whose reward rl/serve/feedback.py fills in) and whoever reads it (the rollout store
rl/stores/store.py, the collator rl/learning/batch.py, summaries, the trainer's logs, eval). A dict,
not a class, because the record crosses every boundary as data: the rollout store holds it as arrays
plus JSON (no pickle), `--mode=rollout` as JSON lines, and producers add their own bookkeeping
fields (a sampler's 'task' and 'sample_seconds', served feedback's 'id' and 'staleness'); a class
would need a to/from-dict pair at each of those boundaries, which is the second form this replaces.
The per-token fields are written once, here, and the episode's (grade, counts, reward) once in
rl/episodes/schema.py (`Episode`, carried by every record as `Episode.to_dict()` and read back by
`Episode.from_record`); `check_record` checks one; the builders (`episode_records`,
`completion_record`) are the only places a record is assembled. An episode, to eval
(eval/agentic.py), is its chain's `Episode` plus the suite's bookkeeping.

Per-token fields, all of length L = len(tokens), aligned with `tokens`:

    tokens[t]    the episode transcript: prompt, then each emitted turn, then each observation
                 (exactly what the model consumed; the trainer never re-tokenizes)
    mask[t]      1 exactly on tokens the policy emitted (sampled, or teacher-forced for scripted
                 runs)
    logprobs[t]  policy tokens: log p(tokens[t] | tokens[:t]) under the distribution the sampler
                 drew from (model/sampling.py: log_softmax(mask_invalid(logits) / temperature) with
                 the RL settings top_k = 0, top_p = 1); 0.0 elsewhere
    versions[t]  policy tokens: the params version of the forward that produced it; -1 elsewhere
    experts      [n_moe_layers, L, k]: experts[:, t] routed the forward that *consumed* tokens[t]
                 (the forward whose logits scored tokens[t+1]). It is `forced_experts` for ONE
                 training forward over `tokens`: Transformer.apply(params, tokens[None],
                 forced_experts=rec['experts'][:, None]) reproduces the sampler's routing, so its
                 logits at t-1 give logprobs[t] for every policy token t. Rows the sampler never
                 computed (the final token, and an observation cut off by the context limit after
                 the last turn) copy the last computed row; they only affect logits past the last
                 policy token (causal attention, per-token dropless routing), which no loss uses.

    malformed_mask[t]  1 on tokens of turns whose tool call was malformed or cut off (negative
                 examples, rl/learning/batch.py); all 0 for a single-turn record

Every record (REQUIRED):
    group_id       records of one group share it (group-relative advantages, rl/learning/batch.py)
    reward         the reward RL trains on: rl/episodes/rewards.py, the only reward (no second
                   score)
    reward_terms   its parts, each signed as it enters the total: 'outcome', and for episodes
                 'malformed' and 'len_<quantity>' (rl.episodes.rewards.episode_reward); summed they
                 give `reward`
A multi-turn episode record (`episode_records`) also has:
    task_id, group, sample (index within the group), policy ('model' | 'forced': scripted turns
    teacher-forced), prompt_len, turn_spans ([start, end) of each emitted turn),
    malformed_turns (indices of this segment's turns with a malformed call or cut off before
    <|end|>), done_reason (submit | no_tool_call | malformed_streak | turn_limit | context_limit
    | no_summary), the grader's facts tests_passed / tests_total / tampered of the hidden tests,
    segments, and counts (rl.episodes.schema.Counts): turns, tool_calls (well-formed,
    executed), tool_io_tokens (call tokens + observation tokens), thinking_tokens (emitted tokens
    inside <|think|>..<|/think|>, tags included), output_tokens (the other emitted tokens outside
    tool calls: free text and <|end|>), malformed_calls, summaries and summary_tokens (summary
    turns of the chain and their tokens, also in output_tokens).

Best-of-K from a shared mid-episode prefix (rl/sampling/rollout.py `prefix_turns`): every record of
the group also has `shared_prefix` = n, its tokens [0, n) being the group's shared prefix (the same
tokens, mask, log-probs in all K records); rl/learning/batch.py gives them loss_mask 0. Absent: 0.

Chains (self-summarization, rl/envs/agent/summary.py): an episode longer than the context is a chain
of segments; each segment is one record (one training sequence) with its own per-token arrays,
prompt_len, turn_spans and malformed_turns (segment-local), and its place: `chain` names the
chain within its group (the sample index), `segment` (0-based) of `segments`. Counts, grade and so
the reward are the chain's, identical on every segment (summary turns are emitted output tokens,
so they count in the length penalty); rl/learning/batch.py computes group-relative advantages over
chains, not segments, and episode means (`episode_ends`) count a chain once. A record without
`chain` is a chain of its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl.episodes.rewards import RewardConfig, episode_reward
from rl.episodes.schema import Episode, EpisodeRecord

# Written once: the builders, the rollout store, record fitting and the collator read these.
PER_TOKEN = ("tokens", "mask", "logprobs", "versions", "malformed_mask")  # [L] each
EXPERTS = "experts"  # [n_moe_layers, L, k]
ARRAY_FIELDS = PER_TOKEN + (EXPERTS,)
DTYPES = dict(
    tokens=np.int32, mask=np.int32, logprobs=np.float32, versions=np.int32, malformed_mask=np.int32
)
REQUIRED = ARRAY_FIELDS + ("group_id", "reward", "reward_terms")


def _arrays(tokens, mask, logprobs, versions, experts, malformed_mask) -> dict:
    """The per-token arrays in their one dtype each ([n, L, k] experts; n may be 0)."""
    values = dict(
        tokens=tokens,
        mask=mask,
        logprobs=logprobs,
        versions=versions,
        malformed_mask=malformed_mask,
    )
    out = {k: np.asarray(v, DTYPES[k]) for k, v in values.items()}
    out[EXPERTS] = _experts(experts, len(out["tokens"]))
    return out


def _experts(experts, n_tokens: int) -> np.ndarray:
    """[n_moe_layers, L, k] int32 (a model without MoE layers: [0, L, 0])."""
    a = np.asarray(experts, np.int32)
    return a.reshape(len(a), n_tokens, -1) if len(a) else np.zeros((0, n_tokens, 0), np.int32)


def _malformed_mask(n_tokens: int, turn_spans, malformed_turns) -> np.ndarray:
    """[L] 1 on the tokens of the turns listed in malformed_turns (segment-local indices)."""
    bad = np.zeros(n_tokens, np.int32)
    for t in malformed_turns:
        start, end = turn_spans[t]
        bad[start:end] = 1
    return bad


def _emitted_classes(tok, tokens, spans) -> tuple[int, int]:
    """(thinking tokens, output tokens) over the emitted turns `spans` of `tokens` (Counts)."""
    think, end_think = tok.special_id("think"), tok.special_id("/think")
    call, end_call = tok.special_id("tool_call"), tok.special_id("/tool_call")
    thinking = output = 0
    for a, b in spans:
        mode = None
        for t in tokens[a:b]:
            if mode is None and t in (think, call):
                mode = t
            if mode == think:
                thinking += 1
            elif mode is None:
                output += 1
            if (mode == think and t == end_think) or (mode == call and t == end_call):
                mode = None
    return thinking, output


def episode_facts(env_rec: EpisodeRecord, tok, reward_cfg: RewardConfig) -> Episode:
    """The environment's finished episode as the one schema's Episode (rl/episodes/schema.py
    `EpisodeRecord.episode`: its grade and counts, with the token classes counted here from its
    emitted turns) and the reward with its terms, rl.episodes.rewards.episode_reward under
    `reward_cfg`. Eval reads the same (eval/agentic.py)."""
    classes = [_emitted_classes(tok, s["tokens"], s["turn_spans"]) for s in env_rec.all_segments()]
    ep = env_rec.episode(
        thinking_tokens=sum(c[0] for c in classes), output_tokens=sum(c[1] for c in classes)
    )
    reward, terms = episode_reward(ep.to_dict(), reward_cfg)
    return dataclasses.replace(ep, reward=reward, reward_terms=terms)


def episode_records(
    env_rec, arrays: list[dict], tok, reward_cfg: RewardConfig, *, group, sample, policy
) -> list[dict]:
    """A finished multi-turn episode (rl/sampling/rollout.py's driver) as records, one per segment
    of its chain. env_rec: the environment's record (rl.episodes.schema.EpisodeRecord); arrays:
    per segment, the engine's {tokens, logprobs, versions, experts [n, L, k]}; group / sample:
    the episode's place in its group; policy: 'model' | 'forced'. Every segment carries the
    chain's facts (`episode_facts`: grade, counts, the reward under `reward_cfg`)."""
    facts = dict(episode_facts(env_rec, tok, reward_cfg).to_dict())
    facts.update(group=group, sample=sample, policy=policy)
    segments = env_rec.all_segments()
    if len(arrays) != len(segments):
        raise ValueError(f"{env_rec.task_id}: {len(arrays)} segment arrays for {len(segments)}")
    return [
        _segment_record(seg, arr, dict(facts, segment=i))
        for i, (seg, arr) in enumerate(zip(segments, arrays))
    ]


def _segment_record(segment: dict, arrays: dict, facts: dict) -> dict:
    """segment: the env's {mask, prompt_len, turn_spans, malformed_turns} of one segment; arrays:
    the engine's of it; facts: the chain's, with this segment's index."""
    spans = [list(s) for s in segment["turn_spans"]]
    bad = _malformed_mask(len(arrays["tokens"]), spans, segment["malformed_turns"])
    return {
        **_arrays(
            arrays["tokens"],
            segment["mask"],
            arrays["logprobs"],
            arrays["versions"],
            arrays[EXPERTS],
            bad,
        ),
        "group_id": f"{facts['task_id']}/{facts['group']}",
        **facts,
        "chain": int(facts["sample"]),
        "prompt_len": int(segment["prompt_len"]),
        "turn_spans": spans,
        "malformed_turns": list(segment["malformed_turns"]),
    }


def completion_record(
    prompt, completion, logprobs, versions, experts, *, group_id, reward, reward_terms, **fields
) -> dict:
    """A single-turn episode (a prompt, then one sampled completion) as a record: the prompt
    untrained (mask 0, logprob 0, version -1), no malformed turns. logprobs / versions: one per
    completion token; experts: [n_moe_layers, L, k] over the whole transcript; reward /
    reward_terms: rl/episodes/rewards.py's (None until the caller rewards it); `fields`: producer
    bookkeeping (e.g. served feedback's id and staleness)."""
    plen, m = len(prompt), len(completion)
    return {
        **_arrays(
            list(prompt) + list(completion),
            np.r_[np.zeros(plen), np.ones(m)],
            np.r_[np.zeros(plen), np.asarray(logprobs, np.float64)],
            np.r_[np.full(plen, -1), np.asarray(versions, np.int64)],
            experts,
            np.zeros(plen + m),
        ),
        "group_id": group_id,
        "reward": reward,
        "reward_terms": reward_terms,
        **fields,
    }


def check_record(rec: dict) -> dict:
    """`rec` itself if it has every REQUIRED field and per-token arrays of one length; else a
    ValueError naming the record and the field."""
    name = f"record {rec.get('group_id', '?')}"
    missing = [f for f in REQUIRED if f not in rec]
    if missing:
        raise ValueError(f"{name}: missing field(s) {missing}")
    n = len(rec["tokens"])
    for f in PER_TOKEN:
        if len(rec[f]) != n:
            raise ValueError(f"{name}: {f} has {len(rec[f])} entries for {n} tokens")
    shape = np.shape(rec[EXPERTS])
    if len(shape) != 3 or shape[1] != n:
        raise ValueError(f"{name}: experts shape {shape} is not [n_moe_layers, {n}, k]")
    return rec


def to_json(rec: dict) -> dict:
    """A record as JSON values (arrays as lists): one line of `--mode=rollout`'s rollouts.jsonl."""
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in rec.items()}


def from_json(d: dict) -> dict:
    """Inverse of to_json (arrays back in their dtypes), checked by check_record."""
    rec = dict(d)
    for f in (f for f in PER_TOKEN if f in rec):
        rec[f] = np.asarray(rec[f], DTYPES[f])
    if EXPERTS in rec:
        rec[EXPERTS] = _experts(rec[EXPERTS], len(rec["tokens"]))
    return check_record(rec)


def policy_tokens(rec: dict) -> int:
    return int(np.sum(rec["mask"]))


def episode_ends(records) -> list[dict]:
    """Each episode once: a chain's last segment (its counts, grade and reward are the chain's)."""
    return [r for r in records if r.get("segment", 0) == r.get("segments", 1) - 1]


def reward_metrics(records) -> dict:
    """The reward scalars every report shows (rollout summaries, the RL trainer's logs and
    TensorBoard): 'reward/mean' and 'reward/<term>' per part (the mean over episodes that have
    it), over episodes (`episode_ends`: each chain once). Pass rate and the other episode metrics:
    rl.episodes.episode_metrics.episode_metrics."""
    eps = episode_ends(records)
    out = {"reward/mean": float(np.mean([r["reward"] for r in eps])) if eps else 0.0}
    terms: dict[str, list[float]] = {}
    for r in eps:
        for k, v in r["reward_terms"].items():
            terms.setdefault(k, []).append(float(v))
    out.update({f"reward/{k}": float(np.mean(v)) for k, v in terms.items()})
    return out
