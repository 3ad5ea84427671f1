"""The decode engine: a request queue over B slots, continuable sequences (multi-turn episodes),
MTP speculative decoding, in-flight weight swaps, per-token RL records (sampler log-prob, routed
experts, params version), a bounded number of compiled programs. It is the only one: a fixed prompt
list (`model.generate`, eval, the single-turn RL sampler) goes through model/prompt_batch.py's
PromptBatch, multi-turn episodes through rl/sampling/rollout.py.

Letters: B slots, R rows prefilled (or decoded) in one call, T tokens per prefilled row, S cache
length, V vocab, D model, K draft tokens, n MoE layers, k experts per token.

    eng = RolloutEngine(cfg, params, slots=8, cache_len=2048, temperature=1.0, valid_vocab=272)
    eng.submit("ep0", prompt_ids, max_new=256, stop_tokens=[END, EOS])  # queued until a slot frees
    eng.submit("r1", ids, max_new=64, sampling=Sampling(temperature=0.7, top_p=0.9))  # its own
    for turn in eng.step():                         # decodes until some request's turn ends
        ...                                         # turn.tokens / .logprobs /
                                                      .versions / .finish_reason
    eng.extend("ep0", observation_ids, max_new=256, stop_tokens=[END, EOS])  # continue
                                                                             that sequence
    experts = eng.finish("ep0")                     # frees the slot -> [consumed, n, k] routing

By concern, one file each (every one's docstring says what it holds):
  model/engine/slots.py        `Spec` (static shapes), `SlotState` (caches, turn settings,
                               per-position records), recording helpers, row gather/scatter,
                               the state's logical shardings
  model/engine/programs.py     the jitted device programs: `prefill` (fresh prompts and `extend`),
                               `decode` (live rows, cache windows), end turns, fetches; the
                               sharded variants
  model/engine/speculation.py  MTP drafts, the MTP cache's catch-up, the verify step
  model/engine/scheduling.py   the host side: `RolloutEngine` (queue, slots, buckets, weight
                               swaps), `Sampling`, `Turn`
  model/engine/map_limit.py    room under the kernel's cap on memory mappings (XLA:CPU maps each
                               compiled kernel): compiled programs dropped before it is reached

Sequences and the pending token. A slot holds one growing sequence (an episode's context). The last
token known for it (the last prompt / observation token, or the last emitted one) is *pending*: not
yet fed to the model. Decoding feeds the pending token at its position p, samples the token at p+1,
which becomes pending. `extend` prefills [pending] + new[:-1] into the slot's latent cache (only
those tokens, at their absolute positions; nothing before is recomputed) and makes new[-1] pending.
A fresh request prefills prompt[:-1]. Because cache entries are indexed by absolute position and a
query attends only to positions <= its own, a slot reused by a new request never sees the old one.

Teacher forcing: `forced` tokens are emitted instead of samples for the first len(forced) decode
steps of a turn, with their log-probs, experts and version recorded exactly as for sampled tokens
(scripted policies through the real engine; scoring).
"""

# The unsharded prefill / decode programs, re-exported for tests that count their compilations.
from model.engine.programs import _decode_jit as _decode_jit
from model.engine.programs import _prefill_jit as _prefill_jit
from model.engine.programs import (
    decode,
    forward_rows,
    prefill,
)
from model.engine.scheduling import RolloutEngine, Sampling, Turn
from model.engine.slots import (
    SlotState,
    Spec,
    cache_len_of,
    init_state,
    slot_sampling,
    state_logical_specs,
)

__all__ = [
    "RolloutEngine",
    "Sampling",
    "SlotState",
    "Spec",
    "Turn",
    "cache_len_of",
    "decode",
    "forward_rows",
    "init_state",
    "prefill",
    "slot_sampling",
    "state_logical_specs",
]
