"""The decode engine's config keys and their defaults, in one place (model/engine_config.py
reads them: EngineConfig.from_block). A block that makes an engine spreads them and names only
what differs, keeping its keys flat so `--config.serve.slots=4` / `--config.rl.cache_len=4096`
work as before:

    c.serve = ml_collections.ConfigDict(dict(**engine_block.decode(cache_len=512), host=...))

A block whose decode keys sit in more than one place takes each default from here by name
(`decode_keys`): configs/rl.py's `rl` (temperature, speculative_k) and `rl.coding` (slots,
cache_split, min_bucket), configs/eval.py's agentic and repos suites (temperature).
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


def decode_keys(*names: str, **overrides) -> dict:
    """The DECODE defaults of `names` and `overrides` only, for a block that keeps its decode keys
    in more than one place (configs/rl.py: temperature and speculative_k in `rl`, the engine's
    slots and buckets in `rl.coding`); an unknown key is an error as in `decode`."""
    picked = decode(**overrides)
    return {k: picked[k] for k in (*names, *overrides)}


def decode(**overrides) -> dict:
    """DECODE with `overrides`; an unknown key is an error (a typo would silently be ignored)."""
    bad = sorted(set(overrides) - set(DECODE))
    if bad:
        raise KeyError(f"configs.engine_block.decode: unknown keys {bad}; known: {sorted(DECODE)}")
    return {**DECODE, **overrides}
