"""The one engine sub-config and the one builder: every place that makes a decode engine
(`generate` / eval's HumanEval through model/prompt_batch.py, eval's agentic policy, the RL coding
sampler, `--mode=rollout`, `--mode=serve`) describes it as an `EngineConfig` and calls
`build_engine`, so a decode setting means the same thing everywhere and is read in one place.

    ec = EngineConfig(slots=8, cache_len=2048, min_bucket=64, temperature=1.0, seed=0)
    eng = build_engine(cfg, params, ec, valid_vocab=tok.vocab_size)

`from_block` reads the decode keys of a config block (configs/engine_block.py holds their defaults:
configs/rollout.py's `rl` and configs/serve.py's `serve` blocks spread them; configs/rl.py's and
configs/eval.py's blocks take theirs by name); a block never repeats a default here. The fields
without a config key (top_k, top_p, stop_width, top_logprobs) keep the engine's own defaults
unless a caller names them.
"""

from __future__ import annotations

import dataclasses

from model.config import ModelConfig

# The decode keys a config block carries (configs/engine_block.py DECODE): slots, context per
# sequence, smallest prefill bucket, sampling temperature, key seed, MTP draft tokens per verify.
# cache_split: how the latent cache is split over the engine's mesh (model/engine/split.py).
BLOCK_KEYS = (
    "slots", "cache_len", "min_bucket", "temperature", "seed", "speculative_k", "cache_split"
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """What a RolloutEngine is built with besides the model, its params and its mesh."""

    slots: int
    cache_len: int
    min_bucket: int
    temperature: float
    seed: int
    speculative_k: int
    cache_split: str = "none"  # model/engine/split.py CACHE_SPLITS
    top_k: int = 0  # the engine's defaults (model.engine.RolloutEngine)
    top_p: float = 1.0
    stop_width: int = 4
    top_logprobs: int = -1

    @classmethod
    def from_block(cls, block, cfg: ModelConfig, **extra) -> EngineConfig:
        """The decode keys of a config block; cache_len is clamped to the model's positions (a
        block may ask for more context than a small model has)."""
        fields = {k: block[k] for k in BLOCK_KEYS}
        fields["cache_len"] = min(fields["cache_len"], cfg.max_position_embeddings)
        return cls(**fields, **extra)


def build_engine(
    cfg: ModelConfig,
    params,
    ec: EngineConfig,
    *,
    valid_vocab: int = 0,
    params_version: int = 0,
    mesh=None,
    rules=None,
):
    """-> a model.engine.RolloutEngine for `ec`; valid_vocab: the tokenizer's ids (0 = all);
    mesh / rules: the engine's own mesh (None = one device, unsharded)."""
    from model.engine import RolloutEngine

    return RolloutEngine(
        cfg,
        params,
        slots=ec.slots,
        cache_len=ec.cache_len,
        temperature=ec.temperature,
        top_k=ec.top_k,
        top_p=ec.top_p,
        valid_vocab=valid_vocab,
        seed=ec.seed,
        params_version=params_version,
        stop_width=ec.stop_width,
        min_bucket=ec.min_bucket,
        speculative_k=ec.speculative_k,
        mesh=mesh,
        rules=rules,
        cache_split=ec.cache_split,
        top_logprobs=ec.top_logprobs,
    )
