"""Episode records: one episode, token-exact, with everything RL needs per token.

Two forms of one record: `RolloutRecord` (the multi-turn rollout driver's output, JSON-ready,
with counts and the grade) and the training record, a dict the samplers write to the rollout
store and rl/batch.py collates: the per-token arrays below (`PER_TOKEN`, `EXPERTS`) plus 'reward'
and 'reward_terms' (rl/rewards.py), 'group_id', 'counts', and the sampler's bookkeeping
('task', 'sample_seconds', and a coding episode's grade fields). `training_record` converts;
`completion_record` builds one for a single-turn episode (a prompt and one completion).

Per-token fields, all of length L = len(tokens), aligned with `tokens`:

    tokens[t]    the episode transcript: prompt, then each emitted turn, then each observation
                 (exactly what the model consumed; the trainer never re-tokenizes)
    mask[t]      1 exactly on tokens the policy emitted (sampled, or teacher-forced for scripted runs)
    logprobs[t]  policy tokens: log p(tokens[t] | tokens[:t]) under the distribution the sampler drew
                 from (model/sampling.py: log_softmax(mask_invalid(logits) / temperature) with the
                 RL settings top_k = 0, top_p = 1); 0.0 elsewhere
    versions[t]  policy tokens: the params version of the forward that produced it; -1 elsewhere
    experts      [n_moe_layers][L][k]: experts[:, t] routed the forward that *consumed* tokens[t]
                 (the forward whose logits scored tokens[t+1]). It is `forced_experts` for ONE
                 training forward over `tokens`: Transformer.apply(params, tokens[None],
                 forced_experts=experts_array()[:, None]) reproduces the sampler's routing, so its
                 logits at t-1 give logprobs[t] for every policy token t. Rows the sampler never
                 computed (the final token, and an observation cut off by the context limit after
                 the last turn) copy the last computed row; they only affect logits past the last
                 policy token (causal attention, per-token dropless routing), which no loss uses.

    malformed_mask[t]  (training record) 1 on tokens of turns whose tool call was malformed or cut
                 off (negative examples, rl/batch.py)

Counts: turns, tool_calls (well-formed, executed), tool_io_tokens (call tokens + observation
tokens), thinking_tokens (emitted tokens inside <|think|>..<|/think|>, tags included),
output_tokens (the other emitted tokens outside tool calls: free text and <|end|>),
malformed_calls, malformed_turns (indices of turns with a malformed call or cut off before <|end|>).
Grade: tests_passed / tests_total of the hidden tests; done_reason: submit | no_tool_call |
malformed_streak | turn_limit | context_limit | no_summary.

Chains (self-summarization, rl/envs/summary.py): an episode longer than the context is a chain of
segments; each segment is one record (one training sequence) with its own per-token arrays,
prompt_len, turn_spans and malformed_turns (segment-local), and `segment` (0-based) of `segments`.
Counts, grade and so the reward are the chain's, identical on every segment (summary turns are
emitted output tokens, so they count in the length penalty); the training record's `chain` names
the chain within its group (the sample index), and rl/batch.py computes group-relative advantages
over chains, not segments. CHAIN_FIELDS are stored with the record (scalars: the store's metadata).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl.envs.tasks import episode_all_pass, episode_score

# Written once: the rollout store, record fitting and the collator read the field lists here.
PER_TOKEN = ("tokens", "mask", "logprobs", "versions", "malformed_mask")  # [L] each
EXPERTS = "experts"  # [n_moe_layers, L, k]
ARRAY_FIELDS = PER_TOKEN + (EXPERTS,)
CHAIN_FIELDS = ("chain", "segment", "segments")  # training record: which chain, which segment


@dataclasses.dataclass
class RolloutRecord:
    task_id: str
    group: int  # group id: the G episodes of one task in a run share it (group-relative advantages)
    sample: int  # index within the group, 0..G-1
    tokens: list[int]
    mask: list[int]
    logprobs: list[float]
    versions: list[int]
    experts: list  # [n_moe_layers][len(tokens)][k] int
    prompt_len: int
    turn_spans: list[list[int]]  # [start, end) of each emitted turn in tokens
    turns: int
    tool_calls: int
    tool_io_tokens: int
    thinking_tokens: int
    output_tokens: int
    malformed_calls: int
    malformed_turns: list[int]
    tests_passed: int
    tests_total: int
    done_reason: str
    policy: str = "model"  # "model" (sampled) | "forced" (scripted turns teacher-forced)
    tampered: bool = False  # the grader caught tampering: scored below an honest failure
    segment: int = 0  # this record's segment of the episode's chain (0-based)
    segments: int = 1  # segments in the chain
    summaries: int = 0  # summary turns of the chain
    summary_tokens: int = 0  # their tokens (in output_tokens too)

    @property
    def reward(self) -> float:
        return episode_score(self.tests_passed, self.tests_total, self.tampered)

    @property
    def all_pass(self) -> bool:
        return episode_all_pass(self.tests_passed, self.tests_total, self.tampered)

    @property
    def policy_tokens(self) -> int:
        return sum(self.mask)

    @property
    def version_span(self) -> tuple[int, int]:
        """(oldest, newest) params version over the policy tokens ((-1, -1) if none)."""
        v = [x for x, m in zip(self.versions, self.mask) if m]
        return (min(v), max(v)) if v else (-1, -1)

    def experts_array(self) -> np.ndarray:
        """[n_moe_layers, L, k] int32 (add the batch axis at 1 for forced_experts)."""
        return np.asarray(self.experts, np.int32).reshape(len(self.experts), len(self.tokens), -1)

    def replay_experts(self) -> np.ndarray:
        """[n_moe_layers, 1, L, k] int32: `forced_experts` for one training forward over tokens[None]."""
        return self.experts_array()[:, None]

    def to_dict(self) -> dict:
        return dict(dataclasses.asdict(self), reward=self.reward, all_pass=self.all_pass)

    @classmethod
    def from_dict(cls, d: dict) -> RolloutRecord:
        """Inverse of to_dict (derived keys ignored); a missing key or a length mismatch is an error
        naming the field."""
        names = [f.name for f in dataclasses.fields(cls)]
        optional = ("policy", "tampered", "segment", "segments", "summaries", "summary_tokens")
        missing = [n for n in names if n not in d and n not in optional]
        if missing:
            raise ValueError(f"RolloutRecord.from_dict: missing field(s) {missing}")
        rec = cls(**{n: d[n] for n in names if n in d})
        n = len(rec.tokens)
        for name in (f for f in PER_TOKEN if hasattr(rec, f)):
            if len(getattr(rec, name)) != n:
                raise ValueError(
                    f"RolloutRecord {rec.task_id}: {name} has {len(getattr(rec, name))} entries "
                    f"for {n} tokens"
                )
        if any(len(layer) != n for layer in rec.experts):
            raise ValueError(f"RolloutRecord {rec.task_id}: experts rows != {n} tokens")
        return rec


def completion_record(prompt, completion, logprobs, versions, experts, **fields) -> dict:
    """A single-turn episode (a prompt, then one sampled completion) as a training record: the
    per-token arrays above with the prompt untrained (mask 0, logprob 0, version -1).
    logprobs / versions: one per completion token; experts: [n_moe_layers, L, k] over the whole
    transcript; `fields`: reward, group_id and the like."""
    plen, m = len(prompt), len(completion)
    return {
        "tokens": np.asarray(list(prompt) + list(completion), np.int32),
        "mask": np.r_[np.zeros(plen), np.ones(m)].astype(np.int32),
        "logprobs": np.r_[np.zeros(plen), np.asarray(logprobs, np.float64)].astype(np.float32),
        "versions": np.r_[np.full(plen, -1), np.asarray(versions, np.int64)].astype(np.int32),
        EXPERTS: np.asarray(experts, np.int32),
        **fields,
    }


def training_record(d: dict, reward_cfg) -> dict:
    """A multi-turn rollout record (RolloutRecord.to_dict(): per-token
    tokens/mask/logprobs/versions, experts [n][L][k], turn_spans, malformed_turns, counts, grade)
    -> the record `collate` takes, with the reward and its terms (rl/rewards.py) and a
    malformed_mask over the tokens of turns with a malformed call (negative examples)."""
    from rl.rewards import LENGTH_QUANTITIES, episode_reward

    counts = {q: d.get(q, 0) for q in LENGTH_QUANTITIES + ("malformed_calls",)}
    reward, terms = episode_reward(
        {
            "tests_passed": d["tests_passed"],
            "tests_total": d["tests_total"],
            "tampered": d.get("tampered", False),
            "counts": counts,
        },
        reward_cfg,
    )
    bad = np.zeros(len(d["tokens"]), np.int32)
    for t in d.get("malformed_turns", []):
        start, end = d["turn_spans"][t]
        bad[start:end] = 1
    return {
        "tokens": np.asarray(d["tokens"], np.int32),
        "mask": np.asarray(d["mask"], np.int32),
        "logprobs": np.asarray(d["logprobs"], np.float32),
        "versions": np.asarray(d["versions"], np.int32),
        "experts": np.asarray(d["experts"], np.int32),  # [n, L, k] (n may be 0)
        "malformed_mask": bad,
        "group_id": f"{d['task_id']}/{d['group']}",
        **_chain_fields(d),
        "reward": reward,
        "reward_terms": terms,
        "counts": counts,
    }


def _chain_fields(d: dict) -> dict:
    """CHAIN_FIELDS of a rollout record: the chain is the episode's sample index in its group. A
    dict without 'sample' (no episode identity) is a chain of its own (rl/batch.py)."""
    if "sample" not in d:
        return {}
    values = (int(d["sample"]), int(d.get("segment", 0)), int(d.get("segments", 1)))
    return dict(zip(CHAIN_FIELDS, values))
