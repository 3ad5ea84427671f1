"""The latent cache split across the engine's chips (SGLang's data-parallel attention for MLA).

MLA's latent cache has no head axis: every head reads all L + R values of a position, so a
tensor-parallel engine (heads over 'tensor') holds every slot's whole cache on every chip of the
tensor axis, and by default on every chip of the expert axis too (kimi_k2 at 256k positions:
61 x 576 values x 2 B x 262,144 = 17.2 GiB per slot in bfloat16, on each of the 64 chips of an
expert 8 x tensor 8 engine). `cache_split` names what else the engine splits it by:

  'slots'     the slot axis over the expert mesh axis too (besides data and fsdp, which split
              slots already): each expert-group chip holds the caches of its own slots and runs
              their attention (data-parallel attention); experts stay expert-parallel, and with
              cfg.moe_comm='alltoall' the tokens, already split by slot, go to their experts by
              all-to-all (model/moe_a2a.py). The engine's activations follow: its batch axis is
              the slot axis.
  'sequence'  the cache's position axis S over the context mesh axis: each chip holds and attends
              over S / context positions of every slot it holds; the attention of a query is
              then a softmax over positions split across chips (GSPMD partitions the absorbed
              attention's max, sum and value contraction across the context axis, each a
              reduction of per-chip partials: the log-sum-exp combine). The engine never splits
              a call's tokens over context, so its decode and prefill programs keep T whole.
  'slots+sequence'  both.

In the compiled decode step of a sequence split (tiny preset, context 4 x tensor 2), each layer's
attention crosses the context axis in three all-reduces of partials, none of the cache: the
scores' max [B,H,T], the sum of exp(scores - max) [B,H,T] and the value contraction [B,H,T,L];
no program all-gathers a layer's cache (tests/test_engine_cache_split.py). A hand-written
combine (one all-gather of each chip's (max, sum, output)) would save two of those round trips
per layer; it is not written.

Per device, the cache's bytes are divided by the product of the split axes' sizes (the slot
split: data x fsdp x expert; the sequence split: context). The split is a rule of the engine's
own logical rules (`engine_rules`): params are placed as before; the slot state's specs
(model/engine/slots.py `state_logical_specs`) and the caches each layer returns
(model/decode.py `_slots_layout`) name BATCH for slots and CACHE_SEQ for positions.
"""

from __future__ import annotations

import math

from model import sharding as sh

CACHE_SPLITS = ("none", "slots", "sequence", "slots+sequence")


def engine_rules(rules, cache_split: str) -> tuple:
    """The engine's logical rules: `rules` (a trainer's or DEFAULT_RULES) with its slot and cache
    position axes set for `cache_split` (module docstring). Without a sequence split CACHE_SEQ is
    unmapped (positions whole); with one, the calls' own token axis (SEQ) is unmapped."""
    if cache_split not in CACHE_SPLITS:
        raise ValueError(f"cache_split must be one of {CACHE_SPLITS}, got {cache_split!r}")
    rules = tuple(sh.normalize_rules(rules))
    batch = sh.mesh_axes_of(sh.BATCH, rules)
    if "slots" in cache_split and "expert" not in batch:
        batch = batch + ("expert",)
    seq = "context" if "sequence" in cache_split else None
    out = [(n, a) for n, a in rules if n not in (sh.BATCH, sh.CACHE_SEQ)]
    out = [(n, None) if n == sh.SEQ and seq else (n, a) for n, a in out]
    return tuple(out) + ((sh.BATCH, batch or None), (sh.CACHE_SEQ, seq))


def check_split(mesh, rules, slots: int, cache_len: int) -> None:
    """One-line errors for a slot count or cache length the split axes cannot divide."""
    for logical, size, what in ((sh.BATCH, slots, "slots"), (sh.CACHE_SEQ, cache_len, "cache_len")):
        axes = sh.mesh_axes_of(logical, rules)
        n = math.prod(mesh.shape[a] for a in axes)
        if size % n:
            raise ValueError(f"{what}={size} is not divisible by mesh axes {axes} ({n})")
