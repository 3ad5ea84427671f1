"""`generate`: a fixed list of prompts through the one decode engine (model/engine/).

    out = generate(cfg, params, prompts, max_new_tokens, temperature=0.0, num_draft=2)
    out.tokens, out.sequences[i].logprobs / .experts / .versions / .replay_experts(), out.stats

`PromptBatch` submits every prompt to a `RolloutEngine` (B slots, continuous batching: a slot
freed by a finished prompt takes the next one), steps it to completion and assembles the
per-prompt records; `generate` is PromptBatch(...).run_until_done().results(). Between `step`
calls the caller may swap params in flight (`batch.engine.set_params(p, version)`): the caches
stay and every token records the version that produced it (rl/sampling/samplers.py).

Letters: n MoE layers, k experts per token.

Router replay: `experts[i]` is the routing of the forward step whose logits produced token i, i.e.
of the input token at position prompt_len - 1 + i; `prompt_experts` covers positions
0..prompt_len-2.
`SequenceResult.replay_experts()` assembles the [n, prompt_len + len(tokens), k] array that
`Transformer.apply(..., forced_experts=...)` takes (batch axis added by the caller).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from model.config import ModelConfig
from model.engine import Turn
from model.engine_config import EngineConfig, build_engine


@dataclasses.dataclass
class SequenceResult:
    """One prompt's generation. experts[i] / versions[i] belong to tokens[i]; see the module
    docstring."""

    tokens: list[int]
    logprobs: np.ndarray  # [n] float32: log p(token) under the distribution it was sampled from
    experts: np.ndarray  # [n, n_moe_layers, k] int32
    versions: np.ndarray  # [n] int32 params version that produced each token
    finish_reason: str  # 'stop' (a stop token, included in tokens) | 'length'
    prompt_len: int
    prompt_experts: np.ndarray  # [prompt_len-1, n_moe_layers, k] int32

    def replay_experts(self) -> np.ndarray:
        """[n_moe_layers, prompt_len + n, k] forced_experts for the forward over prompt + tokens
        (the last position, which predicts past the end, reuses the previous row)."""
        rows = np.concatenate([self.prompt_experts, self.experts, self.experts[-1:]], 0)
        return np.moveaxis(rows, 1, 0)


@dataclasses.dataclass
class GenerateOutput:
    sequences: list[SequenceResult]
    stats: dict

    @property
    def tokens(self) -> list[list[int]]:
        return [s.tokens for s in self.sequences]


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _check_ids(ids, vocab_size: int, what: str) -> None:
    for j, t in enumerate(ids):
        if not isinstance(t, (int, np.integer)) or not 0 <= int(t) < vocab_size:
            raise ValueError(
                f"{what}, position {j}: token id {t!r} is not in [0, vocab_size={vocab_size})"
            )


def _stop_lists(stop_tokens, n_prompts: int) -> list[list[int]]:
    """None | [ids] (all prompts) | [[ids], ...] (one list per prompt)."""
    if stop_tokens is None:
        return [[] for _ in range(n_prompts)]
    stop_tokens = list(stop_tokens)
    if stop_tokens and isinstance(stop_tokens[0], (list, tuple, np.ndarray)):
        if len(stop_tokens) != n_prompts:
            raise ValueError(
                f"stop_tokens: {len(stop_tokens)} per-prompt lists for {n_prompts} prompts"
            )
        return [list(s) for s in stop_tokens]
    return [stop_tokens for _ in range(n_prompts)]


def check_prompts(
    cfg: ModelConfig,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    stop_tokens=None,
    cache_len: int | None = None,
    num_draft: int = 0,
) -> tuple[list[list[int]], int]:
    """Validates a generate call. -> (per-prompt stop lists, cache length S: by default the longest
    prompt + max_new_tokens + num_draft rounded up to 16, so calls of similar sizes share compiled
    programs, within max_position_embeddings; draft positions past the cache are dropped writes)."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, (int, np.integer))
        or max_new_tokens <= 0
    ):
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
    if not prompts:
        raise ValueError("prompts: empty list (need at least one prompt)")
    for n, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError(f"prompt {n}: empty (need at least one token)")
        _check_ids(p, cfg.vocab_size, f"prompt {n}")
    stops = _stop_lists(stop_tokens, len(prompts))
    for n, s in enumerate(stops):
        _check_ids(s, cfg.vocab_size, f"stop_tokens of prompt {n}")
    longest = max(len(p) for p in prompts)
    if cache_len is None:
        if longest + max_new_tokens > cfg.max_position_embeddings:
            raise ValueError(
                f"prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds the model's "
                f"max_position_embeddings={cfg.max_position_embeddings}"
            )
        cache_len = min(
            _round_up(longest + max_new_tokens + num_draft, 16), cfg.max_position_embeddings
        )
    for n, p in enumerate(prompts):
        if len(p) + max_new_tokens > cache_len:
            raise ValueError(
                f"prompt {n}: {len(p)} tokens + max_new_tokens={max_new_tokens} do not fit the "
                f"cache of {cache_len} tokens"
            )
    return stops, cache_len


class PromptBatch:
    """A fixed prompt list on a RolloutEngine: every prompt submitted at once (request id = its
    index), stepped to completion, finished requests' slots freed for the queue, records kept.
    Keyword arguments are generate's."""

    def __init__(
        self,
        cfg: ModelConfig,
        params,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        stop_tokens=None,
        batch_size: int | None = None,
        num_draft: int = 0,
        seed: int = 0,
        params_version: int = 0,
        cache_len: int | None = None,
        valid_vocab: int = 0,
        mesh=None,
        rules=None,
    ):
        stops, cache_len = check_prompts(
            cfg, prompts, max_new_tokens, stop_tokens, cache_len, num_draft
        )
        b = len(prompts) if batch_size is None else batch_size
        if b <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        ec = EngineConfig(
            slots=min(b, len(prompts)),
            cache_len=cache_len,
            min_bucket=16,
            temperature=temperature,
            seed=seed,
            speculative_k=num_draft,
            top_k=top_k,
            top_p=top_p,
            stop_width=max(1, max(len(s) for s in stops)),
        )
        self.engine = build_engine(
            cfg,
            params,
            ec,
            valid_vocab=valid_vocab,
            params_version=params_version,
            mesh=mesh,
            rules=rules,
        )
        self.prompts = [[int(t) for t in p] for p in prompts]
        for n, (p, s) in enumerate(zip(self.prompts, stops)):
            self.engine.submit(n, p, max_new=max_new_tokens, stop_tokens=s)
        self._done: dict[int, SequenceResult] = {}

    @property
    def done(self) -> bool:
        return len(self._done) == len(self.prompts)

    @property
    def finished(self) -> int:
        """Prompts whose generation has ended."""
        return len(self._done)

    def prefill(self) -> PromptBatch:
        """Starts and prefills the prompts that have slots, decoding nothing (a benchmark then times
        the decode alone; step() does this itself)."""
        self.engine.step(0)
        return self

    def step(self, max_iterations: int) -> bool:
        """Up to max_iterations decode (verify) iterations under the current params, refilling
        freed slots from the queue; -> True when every prompt is done."""
        left = max_iterations
        while left > 0 and not self.done:
            before = self.engine.counters()["iterations"]
            turns = self.engine.step(left)
            for turn in turns:
                self._collect(turn)
            ran = self.engine.counters()["iterations"] - before
            if not turns and not ran:  # cannot happen with every turn collected; never spin
                raise RuntimeError(f"PromptBatch: no progress with {self.finished} prompts done")
            left -= ran
        return self.done

    def run_until_done(self) -> PromptBatch:
        while not self.step(2**30):
            pass
        return self

    def _collect(self, turn: Turn) -> None:
        n = turn.request
        plen = len(self.prompts[n])
        rows = self.engine.finish(n)  # [plen + m - 1, n_moe, k]: every consumed token's routing
        self._done[n] = SequenceResult(
            tokens=turn.tokens,
            logprobs=turn.logprobs,
            experts=rows[plen - 1 :],
            versions=turn.versions,
            finish_reason=turn.finish_reason,
            prompt_len=plen,
            prompt_experts=rows[: plen - 1],
        )

    def stats(self) -> dict:
        c = self.engine.counters()
        emitted = sum(len(s.tokens) for s in self._done.values())
        return {
            "iterations": c["iterations"],
            "slot_steps": c["slot_steps"],
            "tokens": emitted,
            "tokens_per_slot_step": emitted / max(c["slot_steps"], 1),
            "drafted": c["drafted"],
            "accepted": c["accepted"],
            "acceptance_rate": c["accepted"] / c["drafted"] if c["drafted"] else float("nan"),
        }

    def results(self) -> GenerateOutput:
        if not self.done:
            raise ValueError(
                f"results(): {len(self.prompts) - self.finished} prompts still running"
            )
        return GenerateOutput([self._done[n] for n in range(len(self.prompts))], self.stats())


def generate(
    cfg: ModelConfig,
    params,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 0.0,
    **kwargs,
) -> GenerateOutput:
    """Generates for each prompt (a list of token ids). kwargs: top_k, top_p, stop_tokens (ids for
    all prompts or one list per prompt), batch_size (slots; default all prompts at once), num_draft
    (MTP speculative tokens per step; 0 = plain), seed, params_version, cache_len, valid_vocab
    (ids >= it are never sampled: the tokenizer's vocab size; 0 = all), mesh and rules (the engine's
    own mesh: sharded decode, model.sharding.role_mesh; None = one device). See PromptBatch; for
    multi-turn episodes (continuable sequences, an open request queue) use model/engine/
    directly."""
    return (
        PromptBatch(cfg, params, prompts, max_new_tokens, temperature=temperature, **kwargs)
        .run_until_done()
        .results()
    )
