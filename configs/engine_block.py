"""The decode engine's config keys and their defaults, in one place (model/engine_config.py
reads them: EngineConfig.from_block). A block that makes an engine spreads them and names only
what differs, keeping its keys flat so `--config.serve.slots=4` / `--config.rl.cache_len=4096`
work as before:

    c.serve = ml_collections.ConfigDict(dict(**engine_block.decode(cache_len=512), host=...))
"""

DECODE = dict(
    slots=8,  # sequences decoded at once (continuous batching over them)
    cache_len=512,  # context per sequence (prompt + completion), <= the model's positions
    min_bucket=16,  # smallest prefill length bucket (fewer compiled programs)
    temperature=1.0,  # 1.0 = the policy's own distribution (what RL expects); 0 = greedy
    seed=0,  # the engine's sampling key stream
    speculative_k=0,  # MTP draft tokens per verify step (0 = plain decoding; needs MTP heads)
    # The latent cache over the engine's mesh (model/engine/split.py): 'none' (whole on every chip
    # of a slot's row), 'slots' (over expert too: data-parallel attention), 'sequence' (positions
    # over context), 'slots+sequence'
    cache_split="none",
)


def decode(**overrides) -> dict:
    """DECODE with `overrides`; an unknown key is an error (a typo would silently be ignored)."""
    bad = sorted(set(overrides) - set(DECODE))
    if bad:
        raise KeyError(f"configs.engine_block.decode: unknown keys {bad}; known: {sorted(DECODE)}")
    return {**DECODE, **overrides}
